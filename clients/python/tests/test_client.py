# SPDX-License-Identifier: Apache-2.0
"""kvq.Client against a real kvq serve: every call, and its errors."""

import socket
import threading
import time
import unittest

from support import ServerTest, kvq, uniq


class Types(ServerTest):

    def test_put_and_get_a_type(self):
        t = uniq("ty")
        got = self.client.put_type(t, 12.5, max_attempts=4, backoff={"base": 0.5},
                                   finished_retention=60, max_lost_runs=2)
        self.assertEqual((got["timeout"], got["max_attempts"], got["backoff"]["base"],
                          got["finished_retention"], got["max_lost_runs"]),
                         (12.5, 4, 0.5, 60.0, 2))
        # omitted settings stay; None clears a nullable one
        self.client.put_type(t, max_attempts=7, finished_retention=None)
        again = self.client.get_type(t)
        self.assertEqual((again["timeout"], again["max_attempts"], again["finished_retention"]),
                         (12.5, 7, None))
        self.assertIn(t, [x["type"] for x in self.client.list_types()])

    def test_counts_and_stats(self):
        t = uniq("ty")
        self.client.put_type(t, 30)
        self.client.add(t, "a")
        self.client.add(t, "b")
        self.client.add(t, "c", scheduled_time=int(time.time() * 1000) + 3600000)
        [job] = self.client.accept(t)
        self.client.finish(t, job["id"], job["lock"], None)
        [job] = self.client.accept(t)
        self.assertEqual(self.client.counts(t), {"pending": 1, "scheduled": 1, "running": 1,
                                                 "finished": 1, "dead": 0, "cancelled": 0})
        stats = self.client.stats()
        self.assertIn(t, [x["type"] for x in stats["types"]])
        self.assertGreaterEqual(stats["accepts"], 2)
        with self.assertRaises(kvq.NotFound):
            self.client.counts(uniq("missing"))

    def test_unknown_type_is_not_found_with_status_and_code(self):
        with self.assertRaises(kvq.NotFound) as cm:
            self.client.get_type(uniq("missing"))
        self.assertEqual((cm.exception.status, cm.exception.code), (404, "not_found"))
        self.assertIsInstance(cm.exception, kvq.KvqError)
        self.assertTrue(cm.exception.message)

    def test_bad_settings_are_invalid_argument(self):
        with self.assertRaises(kvq.InvalidArgument) as cm:
            self.client.put_type(uniq("ty"), 10, max_attempts=0)
        self.assertEqual((cm.exception.status, cm.exception.code), (400, "invalid_argument"))
        self.assertIn("max_attempts", cm.exception.message)

    def test_delete_a_type_with_jobs_is_type_has_jobs(self):
        t = self.new_type()
        self.client.add(t, "j")
        with self.assertRaises(kvq.TypeHasJobs):
            self.client.delete_type(t)
        self.assertEqual(self.client.remove_all(t), 1)
        self.client.delete_type(t)
        with self.assertRaises(kvq.NotFound):
            self.client.get_type(t)


class Producing(ServerTest):

    def test_add_and_if_exists(self):
        t = self.new_type()
        self.assertTrue(self.client.add(t, "a", {"n": 1}, priority=3))
        self.assertEqual(self.client.get(t, "a")["priority"], 3)
        self.assertFalse(self.client.add(t, "a", {"n": 2}, if_exists="keep"))
        self.assertEqual(self.client.get(t, "a")["data"], {"n": 1})
        self.assertTrue(self.client.add(t, "a", {"n": 3}))  # update: replaced
        job = self.client.get(t, "a")
        self.assertEqual((job["data"], job["state"]), ({"n": 3}, "pending"))

    def test_add_later_is_scheduled(self):
        t = self.new_type()
        self.client.add(t, "later", scheduled_time=int(time.time() * 1000) + 60000)
        self.assertEqual([j["id"] for j in self.client.list(t, "scheduled").jobs], ["later"])
        self.assertEqual(self.client.list(t, "due").jobs, [])

    def test_add_many_reports_kept_ids(self):
        t = self.new_type()
        self.client.add(t, "b", {"old": True})
        answer = self.client.add_many(t, [("a", {"x": 1}), {"id": "b", "data": {"new": True}},
                                          {"id": "c", "data": {}, "if_exists": "update"}],
                                      if_exists="keep")
        self.assertEqual(answer, {"added": 2, "kept": ["b"]})
        self.assertEqual(self.client.get(t, "b")["data"], {"old": True})

    def test_add_to_a_type_without_timeout_is_no_timeout(self):
        with self.assertRaises(kvq.NoTimeout) as cm:
            self.client.add(uniq("none"), "j")
        self.assertEqual((cm.exception.status, cm.exception.code), (409, "no_timeout"))
        self.assertIsInstance(cm.exception, kvq.Conflict)

    def test_bad_if_exists_and_unjsonable_data(self):
        t = self.new_type()
        with self.assertRaises(kvq.InvalidArgument):
            self.client.add(t, "j", if_exists="maybe")
        with self.assertRaises(TypeError):
            self.client.add(t, "j", {"x": object()})
        with self.assertRaises(kvq.InvalidArgument):
            self.client.add(t, "", {})
        with self.assertRaises(ValueError):  # an empty path segment never leaves the client
            self.client.get(t, "")


class Reading(ServerTest):

    def test_list_filters_by_state_and_pages_with_a_cursor(self):
        t = self.new_type()
        self.client.add_many(t, [("j%02d" % n, {"n": n}) for n in range(7)])
        self.client.accept(t, count=2)  # j00, j01 running
        first = self.client.list(t, limit=3)
        self.assertEqual([j["id"] for j in first.jobs], ["j00", "j01", "j02"])
        self.assertTrue(first.next_cursor)
        second = self.client.list(t, limit=3, cursor=first.next_cursor)
        self.assertEqual([j["id"] for j in second.jobs], ["j03", "j04", "j05"])
        self.assertEqual([j["id"] for j in self.client.iter_jobs(t, page_size=2)],
                         ["j%02d" % n for n in range(7)])
        self.assertEqual([j["id"] for j in self.client.iter_jobs(t, "running")], ["j00", "j01"])
        self.assertEqual(len(list(self.client.iter_jobs(t, "pending", page_size=2))), 5)
        with self.assertRaises(kvq.InvalidArgument):
            self.client.list(t, "sleeping")

    def test_get_of_a_missing_job_is_not_found(self):
        t = self.new_type()
        with self.assertRaises(kvq.NotFound):
            self.client.get(t, "nope")


class Changing(ServerTest):

    def test_remove(self):
        t = self.new_type()
        self.client.add(t, "j")
        self.client.remove(t, "j")
        with self.assertRaises(kvq.NotFound):
            self.client.remove(t, "j")

    def test_cancel_then_rerun(self):
        t = self.new_type()
        self.client.add(t, "j", {"k": 1})
        job = self.client.cancel(t, "j")
        self.assertEqual((job["state"], job["outcome"]), ("finished", "cancelled"))
        with self.assertRaises(kvq.WrongState) as cm:
            self.client.cancel(t, "j")
        self.assertEqual(cm.exception.code, "wrong_state")
        job = self.client.rerun(t, "j", priority=5)
        self.assertEqual((job["state"], job["priority"], job["data"]), ("pending", 5, {"k": 1}))
        with self.assertRaises(kvq.WrongState):
            self.client.rerun(t, "j")

    def test_workers_calls_and_halted_on_a_stale_lock(self):
        t = self.new_type(max_attempts=2)
        self.client.add(t, "j")
        [job] = self.client.accept(t, worker="w")
        self.assertFalse(self.client.update(t, "j", job["lock"], progress={"half": True}))
        self.assertEqual(self.client.get(t, "j")["progress"], {"half": True})
        self.client.snooze(t, "j", job["lock"])
        self.assertEqual(self.client.get(t, "j")["attempts"], 0)
        with self.assertRaises(kvq.Halted) as cm:
            self.client.update(t, "j", job["lock"])
        self.assertEqual((cm.exception.status, cm.exception.code), (409, "halted"))
        [job] = self.client.accept(t, timeout=1)
        answer = self.client.fail(t, "j", job["lock"], "db down", kind="DbError",
                                  details={"code": 57}, retry_in=0)
        self.assertEqual((answer["dead"], answer["attempt"]), (False, 1))
        [job] = self.client.accept(t, timeout=5)
        self.client.finish(t, "j", job["lock"], {"rows": 12})
        done = self.client.get(t, "j")
        self.assertEqual((done["outcome"], done["result"], done["attempts"]),
                         ("succeeded", {"rows": 12}, 2))
        self.assertEqual([(e["kind"], e["message"], e["details"]) for e in done["errors"]],
                         [("DbError", "db down", {"code": 57})])
        self.assertEqual(self.client.accept(t, timeout=0), [])  # 204: nothing due

    def test_worker_membership_calls(self):
        wt = uniq("wt")
        token = self.client.register_worker(wt, "w1", info={"v": 1}, health_timeout=5)
        with self.assertRaises(kvq.AlreadyExists):
            self.client.register_worker(wt, "w1")
        self.client.heartbeat_worker(wt, "w1", token)
        with self.assertRaises(kvq.WrongToken) as cm:
            self.client.heartbeat_worker(wt, "w1", "0" * 32)
        self.assertEqual(cm.exception.status, 403)
        self.assertEqual([w["id"] for w in self.client.list_workers(wt)["workers"]], ["w1"])
        self.client.deregister_worker(wt, "w1", token)
        self.assertEqual(self.client.list_workers(wt)["workers"], [])


class Watching(ServerTest):

    def finish_soon(self, t, jid, delay=0.3, fail=None, cancel=False):
        def run():
            time.sleep(delay)
            if cancel:
                self.client.cancel(t, jid)
                return
            [job] = self.client.accept(t, timeout=5)
            if fail:
                self.client.fail(t, jid, job["lock"], fail, kind="Boom", retry=False)
            else:
                self.client.finish(t, jid, job["lock"], {"ok": jid})
        th = threading.Thread(target=run, daemon=True)
        th.start()
        self.addCleanup(th.join, 10)

    def test_wait_for_a_state_or_none_on_timeout(self):
        t = self.new_type()
        self.client.add(t, "j")
        self.assertIsNone(self.client.wait(t, "j", "running", timeout=0.2))
        self.finish_soon(t, "j")
        event = self.client.wait(t, "j", "finished", timeout=10)
        self.assertEqual((event["state"], event["outcome"], event["result"]),
                         ("finished", "succeeded", {"ok": "j"}))

    def test_events_follow_the_job_to_its_end(self):
        t = self.new_type()
        self.client.add(t, "j")
        self.finish_soon(t, "j")
        states = [e["state"] for e in self.client.events(t, "j", timeout=10)]
        self.assertEqual(states[0], "pending")
        self.assertEqual(states[-1], "finished")
        with self.assertRaises(kvq.NotFound):
            list(self.client.events(t, "nope"))

    def test_events_with_a_timeout_raise_timeout_error(self):
        t = self.new_type()
        self.client.add(t, "j")
        started = time.monotonic()
        with self.assertRaises(TimeoutError):
            for _ in self.client.events(t, "j", timeout=0.5):
                pass
        self.assertLess(time.monotonic() - started, 5)

    def test_result_of_a_job_that_succeeds(self):
        t = self.new_type()
        self.client.add(t, "j")
        self.finish_soon(t, "j")
        self.assertEqual(self.client.result(t, "j", timeout=10), {"ok": "j"})
        # and of one that had already finished
        self.assertEqual(self.client.result(t, "j", timeout=1), {"ok": "j"})

    def test_result_of_a_dead_job_raises_its_last_error(self):
        t = self.new_type()
        self.client.add(t, "j")
        self.finish_soon(t, "j", fail="card declined")
        with self.assertRaises(kvq.JobDead) as cm:
            self.client.result(t, "j", timeout=10)
        self.assertEqual((cm.exception.last_error["kind"], cm.exception.last_error["message"]),
                         ("Boom", "card declined"))
        self.assertIn("card declined", str(cm.exception))

    def test_result_of_a_cancelled_job_and_on_timeout(self):
        t = self.new_type()
        self.client.add(t, "j")
        with self.assertRaises(TimeoutError):
            self.client.result(t, "j", timeout=0.3)
        self.finish_soon(t, "j", cancel=True)
        with self.assertRaises(kvq.JobCancelled):
            self.client.result(t, "j", timeout=10)


class Auth(ServerTest):
    token = "s3cret"

    def test_a_wrong_or_missing_token_is_unauthorized(self):
        t = self.new_type()  # the right token works
        for token in (None, "wrong"):
            with self.subTest(token=token):
                with self.assertRaises(kvq.Unauthorized) as cm:
                    kvq.Client(self.server.url, token=token).get_type(t)
                self.assertEqual((cm.exception.status, cm.exception.code), (401, "unauthorized"))


class Network(unittest.TestCase):

    def test_no_server_is_a_retryable_network_error(self):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        s.close()  # nothing listens there now
        with self.assertRaises(kvq.NetworkError) as cm:
            kvq.Client("http://127.0.0.1:%d" % port, timeout=2).get_type("t")
        self.assertIsNone(cm.exception.status)
        self.assertTrue(cm.exception.retryable)

    def test_a_bad_url_is_refused(self):
        with self.assertRaises(ValueError):
            kvq.Client("127.0.0.1:7411")


if __name__ == "__main__":
    unittest.main()
