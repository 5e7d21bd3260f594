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


if __name__ == "__main__":
    unittest.main()
