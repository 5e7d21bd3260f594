# SPDX-License-Identifier: Apache-2.0
"""Inline mode: kvq.testing.InlineClient runs handlers in process, without a server."""

import threading
import unittest

import support  # noqa: F401  (puts the package on sys.path)
import kvq
from kvq.testing import InlineClient


class Inline(unittest.TestCase):

    def setUp(self):
        self.client = InlineClient()
        self.client.put_type("email", timeout=30, max_attempts=3, backoff={"base": 5, "jitter": 0})
        self.worker = kvq.Worker(self.client, worker_id="test")

    def test_drain_runs_the_handler_and_keeps_its_result(self):
        @self.worker.handler("email")
        def send(job):
            job.progress({"sending": job.data["to"]})
            return {"sent_to": job.data["to"], "cancelled": job.cancelled.is_set()}

        self.assertTrue(self.client.add("email", "welcome", {"to": "ada"}))
        self.assertEqual(self.worker.drain(), 1)
        job = self.client.get("email", "welcome")
        self.assertEqual((job["state"], job["outcome"], job["attempts"]),
                         ("finished", "succeeded", 1))
        self.assertEqual(job["result"], {"sent_to": "ada", "cancelled": False})
        self.assertEqual(job["progress"], {"sending": "ada"})
        self.assertEqual(self.client.result("email", "welcome", timeout=0), job["result"])
        self.assertEqual(self.worker.drain(), 0)

    def test_a_failure_is_retried_under_the_types_policy_and_ends_dead(self):
        @self.worker.handler("email")
        def send(job):
            raise LookupError("no such user")

        self.client.add("email", "bad")
        self.assertEqual(self.worker.drain(), 1)
        job = self.client.get("email", "bad")
        self.assertEqual((job["state"], job["attempts"]), ("pending", 1))
        self.assertEqual([(e["kind"], e["message"]) for e in job["errors"]],
                         [("LookupError", "no such user")])
        self.assertIn("in send", job["errors"][0]["details"]["stack"])
        self.assertEqual([j["id"] for j in self.client.list("email", "scheduled").jobs], ["bad"])
        self.assertEqual(self.worker.drain(), 0)  # its retry is 5 s away
        self.client.advance(5)
        self.assertEqual(self.worker.drain(), 1)
        self.assertEqual(self.worker.drain(run_scheduled=True), 1)  # the third, after 10 s
        with self.assertRaises(kvq.JobDead) as cm:
            self.client.result("email", "bad", timeout=0)
        self.assertEqual((cm.exception.job["attempts"], len(cm.exception.job["errors"])), (3, 3))

    def test_the_same_errors_as_a_server(self):
        with self.assertRaises(kvq.NoTimeout):
            self.client.add("sms", "x")
        with self.assertRaises(kvq.NotFound) as cm:
            self.client.get("email", "none")
        self.assertEqual((cm.exception.status, cm.exception.code), (404, "not_found"))
        self.client.add("email", "k", {"v": 1})
        self.assertFalse(self.client.add("email", "k", {"v": 2}, if_exists="keep"))
        self.assertEqual(self.client.add_many("email", [("k", {}), ("m", {})], if_exists="keep"),
                         {"added": 1, "kept": ["k"]})
        [job] = self.client.accept("email", max_priority=0)
        self.client.snooze("email", job["id"], job["lock"])
        with self.assertRaises(kvq.Halted):
            self.client.finish("email", job["id"], job["lock"])
        self.client.cancel("email", "k")
        with self.assertRaises(kvq.WrongState):
            self.client.cancel("email", "k")
        self.assertEqual(self.client.rerun("email", "k")["state"], "pending")

    def test_a_handler_whose_job_is_removed_is_cancelled(self):
        seen = {}

        @self.worker.handler("email")
        def send(job):
            self.client.remove("email", job.id)  # as if someone removed it meanwhile
            try:
                job.progress(1)
            except kvq.Halted:
                seen["reason"] = job.cancel_reason
            return "ignored"

        self.client.add("email", "gone")
        self.assertEqual(self.worker.drain(), 1)
        self.assertEqual(seen, {"reason": "halted"})

    def test_run_in_a_thread_and_await_the_result(self):
        self.worker.poll_timeout = 0.2
        self.worker.register("email", lambda job: job.data["n"] * 2)
        th = threading.Thread(target=self.worker.run, daemon=True)
        th.start()
        self.client.add("email", "double", {"n": 21})
        try:
            self.assertEqual(self.client.result("email", "double", timeout=10), 42)
        finally:
            self.worker.stop()
            th.join(10)
        self.assertFalse(th.is_alive())


class InlineTimeAndFlowControl(unittest.TestCase):
    """The inline client's clock, pause / resume, max_running, rate and groups."""

    def setUp(self):
        self.client = InlineClient()
        self.client.put_type("t", timeout=30)
        self.worker = kvq.Worker(self.client, worker_id="test")
        self.ran = []
        self.worker.register("t", lambda job: self.ran.append(job.id))

    def test_a_job_scheduled_later_waits_for_the_clients_clock(self):
        later = self.client.now_ms() + 3600 * 1000
        self.client.add("t", "later", scheduled_time=later)
        self.client.add("t", "now")
        self.assertEqual(self.worker.drain(), 1)
        self.assertEqual(self.ran, ["now"])
        self.assertEqual(self.client.get("t", "later")["state"], "pending")
        self.client.advance(3599)
        self.assertEqual(self.worker.drain(), 0)
        self.client.advance(1)
        self.assertEqual(self.worker.drain(), 1)
        self.assertEqual(self.ran, ["now", "later"])
        self.assertGreaterEqual(self.client.get("t", "later")["started_at"], later)

    def test_run_scheduled_runs_jobs_in_their_time_order(self):
        now = self.client.now_ms()
        self.client.add("t", "b", scheduled_time=now + 20000, priority=-5)
        self.client.add("t", "a", scheduled_time=now + 10000)
        self.assertEqual(self.worker.drain(), 0)
        self.assertEqual(self.worker.drain(run_scheduled=True), 2)
        self.assertEqual(self.ran, ["a", "b"])

    def test_pause_and_resume(self):
        paused = self.client.pause_type("t")
        self.assertEqual((paused["paused"], paused["paused_until"]), (True, None))
        self.client.add("t", "j")
        self.assertEqual(self.worker.drain(run_scheduled=True), 0)
        self.assertEqual(self.client.accept("t"), [])
        self.assertEqual(self.client.resume_type("t")["paused"], False)
        self.assertEqual(self.worker.drain(), 1)
        with self.assertRaises(kvq.NotFound):
            self.client.pause_type("missing")

    def test_a_pause_for_a_while_ends_by_the_clients_clock(self):
        before = self.client.now_ms()
        got = self.client.pause_type("t", for_ms=60000)
        self.assertTrue(before + 60000 <= got["paused_until"] <= self.client.now_ms() + 60000)
        self.client.add("t", "j")
        self.assertEqual(self.worker.drain(), 0)
        self.client.advance(60)
        self.assertEqual(self.client.get_type("t")["paused"], False)
        self.assertEqual(self.worker.drain(), 1)
        # drain(run_scheduled=True) moves the clock past a pause's end too
        self.client.pause_type("t", for_ms=5000)
        self.client.add("t", "k")
        self.assertEqual(self.worker.drain(run_scheduled=True), 1)
        with self.assertRaises(kvq.InvalidArgument):
            self.client.pause_type("t", for_ms=0)

    def test_max_running_caps_accepts_and_a_workers_concurrency(self):
        got = self.client.put_type("t", max_running=2)
        self.assertEqual(got["max_running"], 2)
        for i in range(4):
            self.client.add("t", "j%d" % i)
        first = self.client.accept("t", count=10)
        self.assertEqual(len(first), 2)
        self.assertEqual(self.client.accept("t", count=10), [])
        self.client.finish("t", first[0]["id"], first[0]["lock"])
        self.assertEqual(len(self.client.accept("t", count=10)), 1)
        self.client.put_type("t", max_running=None)
        self.assertEqual(len(self.client.accept("t", count=10)), 1)
        with self.assertRaises(kvq.InvalidArgument):
            self.client.put_type("t", max_running=0)

    def test_max_running_holds_under_a_worker_with_more_concurrency(self):
        self.client.put_type("c", timeout=30, max_running=2)
        lock = threading.Lock()
        state = {"now": 0, "most": 0}

        def handler(job):
            with lock:
                state["now"] += 1
                state["most"] = max(state["most"], state["now"])
            threading.Event().wait(0.05)
            with lock:
                state["now"] -= 1

        worker = kvq.Worker(self.client, worker_id="conc", concurrency=6, poll_timeout=0.2)
        worker.register("c", handler)
        self.client.add_many("c", [("j%d" % i, {}) for i in range(8)])
        th = threading.Thread(target=worker.run, daemon=True)
        th.start()
        try:
            for i in range(8):
                self.client.result("c", "j%d" % i, timeout=20)
        finally:
            worker.stop()
            th.join(10)
        self.assertEqual(state["most"], 2)

    def test_rate_limits_accepts_per_window_of_the_clients_clock(self):
        got = self.client.put_type("t", rate={"limit": 2, "period_ms": 1000})
        self.assertEqual(got["rate"], {"limit": 2, "period_ms": 1000})
        for i in range(5):
            self.client.add("t", "j%d" % i)
        self.assertEqual(self.worker.drain(), 2)
        self.client.advance(1)
        self.assertEqual(self.worker.drain(), 2)
        self.assertEqual(self.worker.drain(run_scheduled=True), 1)
        with self.assertRaises(kvq.InvalidArgument):
            self.client.put_type("t", rate={"limit": 0, "period_ms": 1000})

    def test_groups_take_turns(self):
        at = self.client.now_ms() - 10000  # all due, all at the same millisecond
        self.client.add_many("t", [{"id": "a%d" % i, "group": "A", "scheduled_time": at}
                                   for i in range(3)])
        self.client.add("t", "b0", group="B", scheduled_time=at)
        self.client.add("t", "b1", group="B", scheduled_time=at)
        self.client.add("t", "n0", scheduled_time=at)
        self.assertEqual(self.client.get("t", "a0")["group"], "A")
        self.assertIsNone(self.client.get("t", "n0")["group"])
        self.assertEqual(self.worker.drain(), 6)
        # the job without a group wins the tie at its time; then the groups, by name, each
        # going to the back once served (as kvq serve gives them)
        self.assertEqual(self.ran, ["n0", "a0", "b0", "a1", "b1", "a2"])

    def _one_by_one(self):
        out = []
        while True:
            jobs = self.client.accept("t")
            if not jobs:
                return out
            out.append(jobs[0]["id"])

    def _group_and_ungrouped(self, base, step):
        self.client.add_many("t", [{"id": "g%d" % i, "group": "G", "scheduled_time": base}
                                   for i in (1, 2, 3)])
        self.client.add_many("t", [{"id": "u%d" % i, "scheduled_time": base + i * step}
                                   for i in (1, 2, 3)])

    def test_jobs_without_a_group_keep_their_own_time_against_a_groups_turns(self):
        # kvq serve, jobs due at base (G) and base + 1, 2, 3 ms (u1..u3), one accept at a
        # time: g1, u1, u2, u3, g2, g3 — G goes to the back once served, while each job
        # without a group keeps its own time (not "one more group": g1, u1, g2, u2, g3, u3).
        self._group_and_ungrouped(self.client.now_ms() - 10000, 1)
        self.assertEqual(self._one_by_one(), ["g1", "u1", "u2", "u3", "g2", "g3"])

    def test_a_batch_accept_takes_the_same_order(self):
        self._group_and_ungrouped(self.client.now_ms() - 10000, 1)
        got = self.client.accept("t", count=10)
        self.assertEqual([j["id"] for j in got], ["g1", "u1", "u2", "u3", "g2", "g3"])

    def test_a_groups_turn_against_jobs_without_a_group_as_the_clock_moves(self):
        # G's jobs at base, u1..u3 at base + 1, 2, 3 s; one accept at each of base + 1 .. 6 s.
        # kvq serve (sleeping instead of advancing): g1, u1, g2, u2, u3, g3 — G's turn is its
        # last accept, and a job without a group due by then goes first (u3 at base + 3 s
        # against g2's accept at base + 3 s: a tie, to the job).
        base = self.client.now_ms()
        self._group_and_ungrouped(base, 1000)
        order = []
        for _ in range(6):
            self.client.advance(1)
            order += [j["id"] for j in self.client.accept("t")]
        self.assertEqual(order, ["g1", "u1", "g2", "u2", "u3", "g3"])

    def test_a_group_whose_first_job_is_not_due_is_not_in_line(self):
        now = self.client.now_ms()
        self.client.add("t", "g-later", group="G", priority=0, scheduled_time=now + 3600 * 1000)
        self.client.add("t", "g-due", group="G", priority=1, scheduled_time=now - 1000)
        self.client.add("t", "u", priority=1, scheduled_time=now - 500)
        self.assertEqual([j["id"] for j in self.client.accept("t", count=10)], ["u"])
        self.assertEqual(self.client.groups("t")[0]["in_turn_at"], now + 3600 * 1000)
        self.client.advance(3600)
        self.assertEqual(self._one_by_one(), ["g-later", "g-due"])

    def test_a_better_priority_goes_first_whatever_the_turn(self):
        self.client.add("t", "a0", group="A")
        self.client.add("t", "a1", group="A", priority=-1)
        self.client.add("t", "b0", group="B")
        self.worker.drain()
        self.assertEqual(self.ran, ["a1", "b0", "a0"])

    def test_max_running_per_group_and_the_groups_listing(self):
        got = self.client.put_type("t", max_running_per_group=1)
        self.assertEqual(got["max_running_per_group"], 1)
        self.client.add_many("t", [{"id": "a0", "group": "A"}, {"id": "a1", "group": "A"},
                                   {"id": "b0", "group": "B"}])
        jobs = self.client.accept("t", count=10)
        self.assertEqual(sorted(j["id"] for j in jobs), ["a0", "b0"])
        groups = self.client.groups("t")
        self.assertEqual([(g["group"], g["running"], g["pending"], g["full"]) for g in groups],
                         [("A", 1, 1, True), ("B", 1, 0, True)])
        self.assertIsNone(groups[0]["in_turn_at"])
        self.assertEqual([g["group"] for g in self.client.groups("t", after="A")], ["B"])
        self.assertEqual([g["group"] for g in self.client.iter_groups("t", page_size=1)],
                         ["A", "B"])
        self.assertEqual(self.client.accept("t"), [])
        a0 = [j for j in jobs if j["id"] == "a0"][0]
        self.client.finish("t", "a0", a0["lock"])
        self.assertEqual(self.client.groups("t")[0]["full"], False)
        self.assertEqual([j["id"] for j in self.client.accept("t")], ["a1"])
        with self.assertRaises(kvq.InvalidArgument):
            self.client.add("t", "bad", group="")
        with self.assertRaises(kvq.InvalidArgument):
            self.client.add("t", "bad", group="x" * 129)


if __name__ == "__main__":
    unittest.main()


class InlineCounts(unittest.TestCase):

    def test_counts_as_a_server_does(self):
        client = InlineClient()
        client.put_type("t", 30, max_attempts=1)
        worker = kvq.Worker(client)
        worker.register("t", lambda job: job.data["ok"] or 1 / 0)
        client.add("t", "good", {"ok": True})
        client.add("t", "bad", {"ok": False})
        client.add("t", "later", {"ok": True}, scheduled_time=client.now_ms() + 60000)
        client.add("t", "gone", {"ok": True})
        client.cancel("t", "gone")
        self.assertEqual(worker.drain(), 2)
        self.assertEqual(client.counts("t"), {"pending": 1, "scheduled": 1, "running": 0,
                                              "finished": 3, "dead": 1, "cancelled": 1})
        with self.assertRaises(kvq.NotFound):
            client.counts("missing")
