# SPDX-License-Identifier: Apache-2.0
"""kvq.Client's finish with next, accept_any, an add's own timeout and bytes bodies, and the
Worker's one request per job, against a real kvq serve."""

import threading
import time
import unittest

from support import ServerTest, kvq, uniq, wait_until


class FinishWithNext(ServerTest):

    def test_finish_with_next_returns_the_next_job_then_none(self):
        t = self.new_type()
        self.client.add(t, "a", {"n": 1})
        self.client.add(t, "b", {"n": 2})
        [job] = self.client.accept(t, worker="w1")
        nxt = self.client.finish(t, job["id"], job["lock"], {"ok": True},
                                 next={"worker": "w2"})
        self.assertEqual(self.client.get(t, job["id"])["outcome"], "succeeded")
        self.assertEqual(nxt["id"], {"a": "b", "b": "a"}[job["id"]])
        self.assertEqual(self.client.get(t, nxt["id"])["worker"], "w2")
        self.assertIsNone(self.client.finish(t, nxt["id"], nxt["lock"], next={}))
        self.assertEqual(self.client.get(t, nxt["id"])["state"], "finished")

    def test_finish_without_next_returns_none(self):
        t = self.new_type()
        self.client.add(t, "a")
        [job] = self.client.accept(t)
        self.assertIsNone(self.client.finish(t, "a", job["lock"]))

    def test_a_waiting_next_gets_a_job_added_later(self):
        t = self.new_type()
        self.client.add(t, "first")
        [job] = self.client.accept(t)
        out = {}
        th = threading.Thread(target=lambda: out.setdefault(
            "next", self.client.finish(t, "first", job["lock"], next={"timeout": 10})))
        th.start()
        wait_until(lambda: self.client.get(t, "first")["state"] == "finished", 5)
        self.client.add(t, "second")
        th.join(15)
        self.assertEqual(out["next"]["id"], "second")

    def test_a_fenced_finish_with_next_is_halted(self):
        t = self.new_type()
        self.client.add(t, "a")
        [job] = self.client.accept(t)
        self.client.cancel(t, "a")
        self.client.add(t, "b")
        with self.assertRaises(kvq.Halted):
            self.client.finish(t, "a", job["lock"], next={})
        self.assertEqual(self.client.get(t, "b")["state"], "pending")


class AcceptAny(ServerTest):

    def test_accept_any_takes_the_best_priority_across_types(self):
        t1, t2 = self.new_type(), self.new_type()
        self.client.add(t1, "low", priority=9)
        self.client.add(t2, "high", priority=1)
        [job] = self.client.accept_any([t1, t2], worker="w")
        self.assertEqual((job["type"], job["id"]), (t2, "high"))
        [job] = self.client.accept_any([t1, t2])
        self.assertEqual((job["type"], job["id"]), (t1, "low"))
        self.assertEqual(self.client.accept_any([t1, t2], timeout=0.2), [])

    def test_accept_any_with_bad_types_is_invalid_argument(self):
        with self.assertRaises(kvq.InvalidArgument) as cm:
            self.client.accept_any([])
        self.assertIn("types", cm.exception.message)


class TimeoutAndBody(ServerTest):

    def test_bytes_body_round_trips_and_the_job_shows_its_own_timeout(self):
        t = self.new_type()
        raw = b"\x00\xffbin\x01"
        self.client.add(t, "bin", body=raw, timeout=20)
        job = self.client.get(t, "bin")
        self.assertEqual((job["data"], job["data_format"], job["timeout"]), (None, "bytes", 20.0))
        self.assertEqual(kvq.job_body(job), raw)
        self.client.add(t, "txt", body="h\u00e9llo")
        self.assertEqual(kvq.job_body(self.client.get(t, "txt")), "h\u00e9llo".encode())
        self.assertIsNone(kvq.job_body(self.client.get(t, "txt") | {"data_format": "json"}))

    def test_a_bad_own_timeout_is_invalid_argument_naming_it(self):
        t = self.new_type()
        with self.assertRaises(kvq.InvalidArgument) as cm:
            self.client.add(t, "x", timeout=0)
        self.assertIn("timeout", cm.exception.message)
        with self.assertRaises(ValueError):
            self.client.add(t, "x", {"a": 1}, body="b")


def requests_of(metrics, route):
    total = 0
    for line in metrics.splitlines():
        if line.startswith('kvq_http_requests_total{route="%s"' % route):
            total += int(float(line.rsplit(" ", 1)[1]))
    return total


class WorkerUsesNext(ServerTest):

    def metrics(self):
        import urllib.request
        with urllib.request.urlopen(self.server.url + "/metrics", timeout=10) as r:
            return r.read().decode()

    def test_a_busy_worker_spends_one_request_per_job(self):
        t = self.new_type()
        worker = kvq.Worker(self.client, worker_id=uniq("w"), register=False,
                            handle_signals=False, poll_timeout=1)
        seen = []
        worker.register(t, lambda job: seen.append(job.id) or {"i": job.data["i"]})
        self.client.add_many(t, [("j%02d" % i, {"i": i}) for i in range(30)])
        before = requests_of(self.metrics(), "/v1/accept/{type}")
        self.run_worker(worker)
        wait_until(lambda: len(self.client.list(t, "succeeded", limit=100).jobs) == 30, 20,
                   message="the worker to finish every job")
        accepts = requests_of(self.metrics(), "/v1/accept/{type}") - before
        self.assertEqual(sorted(seen), ["j%02d" % i for i in range(30)])
        # The first accept takes one job; each finish takes the next: a handful of accepts
        # (the idle worker's long-polls) at most, never one per job.
        self.assertLess(accepts, 8, "the worker accepted %d times for 30 jobs" % accepts)


if __name__ == "__main__":
    unittest.main()
