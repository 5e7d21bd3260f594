# SPDX-License-Identifier: Apache-2.0
"""kvq.testing.InlineClient: a client of a `kvq serve --ephemeral` it starts and stops."""

import os
import stat
import tempfile
import threading
import time
import unittest

import support
import kvq
from kvq.testing import InlineClient, find_kvq

# A type whose retries come within milliseconds, so a test does not wait.
FAST_RETRIES = {"base": 0.001, "cap": 0.01, "jitter": 0}


class Inline(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.client = InlineClient(support.KVQ_BIN)

    @classmethod
    def tearDownClass(cls):
        cls.client.close()

    def setUp(self):
        self.type = support.uniq("email")
        self.client.put_type(self.type, timeout=30, max_attempts=3, backoff=FAST_RETRIES)
        self.worker = kvq.Worker(self.client, worker_id="test")

    def test_drain_runs_the_handler_and_keeps_its_result(self):
        @self.worker.handler(self.type)
        def send(job):
            job.progress({"sending": job.data["to"]})
            return {"sent_to": job.data["to"], "cancelled": job.cancelled.is_set()}

        self.assertTrue(self.client.add(self.type, "welcome", {"to": "ada"}))
        self.assertEqual(self.worker.drain(), 1)
        job = self.client.get(self.type, "welcome")
        self.assertEqual((job["state"], job["outcome"], job["attempts"]),
                         ("finished", "succeeded", 1))
        self.assertEqual(job["result"], {"sent_to": "ada", "cancelled": False})
        self.assertEqual(job["progress"], {"sending": "ada"})
        self.assertEqual(self.client.result(self.type, "welcome", timeout=1), job["result"])
        self.assertEqual(self.worker.drain(), 0)

    def test_a_failure_is_retried_under_the_types_policy_and_ends_dead(self):
        # Retries 0.3 s then 0.6 s later: not due during the first drain.
        self.client.put_type(self.type, backoff={"base": 0.3, "factor": 2, "cap": 10, "jitter": 0})

        @self.worker.handler(self.type)
        def send(job):
            raise LookupError("no such user")

        self.client.add(self.type, "bad")
        self.assertEqual(self.worker.drain(), 1)
        job = self.client.get(self.type, "bad")
        self.assertEqual((job["state"], job["attempts"]), ("pending", 1))
        self.assertEqual([(e["kind"], e["message"]) for e in job["errors"]],
                         [("LookupError", "no such user")])
        self.assertIn("in send", job["errors"][0]["details"]["stack"])
        self.assertEqual(self.worker.drain(run_scheduled=True, timeout=10), 2)
        with self.assertRaises(kvq.JobDead) as cm:
            self.client.result(self.type, "bad", timeout=1)
        self.assertEqual((cm.exception.job["attempts"], len(cm.exception.job["errors"])), (3, 3))

    def test_run_scheduled_waits_for_a_later_job_and_gives_up_after_its_timeout(self):
        self.worker.register(self.type, lambda job: job.id)
        now_ms = int(time.time() * 1000)
        self.client.add(self.type, "soon", scheduled_time=now_ms + 300)
        self.assertEqual(self.worker.drain(), 0)  # not due yet
        started = time.monotonic()
        self.assertEqual(self.worker.drain(run_scheduled=True, timeout=10), 1)
        self.assertGreater(time.monotonic() - started, 0.15)
        self.client.add(self.type, "tomorrow", scheduled_time=now_ms + 86400000)
        with self.assertRaises(TimeoutError) as cm:
            self.worker.drain(run_scheduled=True, timeout=0.3)
        self.assertIn(self.type, str(cm.exception))

    def test_the_servers_own_errors(self):
        with self.assertRaises(kvq.NoTimeout):
            self.client.add(support.uniq("sms"), "x")
        with self.assertRaises(kvq.NotFound) as cm:
            self.client.get(self.type, "none")
        self.assertEqual((cm.exception.status, cm.exception.code), (404, "not_found"))
        self.client.add(self.type, "k", {"v": 1})
        self.assertFalse(self.client.add(self.type, "k", {"v": 2}, if_exists="keep"))
        [job] = self.client.accept(self.type)
        self.client.snooze(self.type, job["id"], job["lock"])
        with self.assertRaises(kvq.Halted):  # handed back: the run is no longer this lock's
            self.client.update(self.type, job["id"], job["lock"])
        [again] = self.client.accept(self.type)
        with self.assertRaises(kvq.Halted):  # taken again: only the new lock may end it
            self.client.finish(self.type, job["id"], job["lock"])
        self.client.finish(self.type, again["id"], again["lock"])

    def test_a_handler_whose_job_is_removed_is_cancelled(self):
        seen = {}

        @self.worker.handler(self.type)
        def send(job):
            self.client.remove(self.type, job.id)  # as if someone removed it meanwhile
            try:
                job.progress(1)
            except kvq.Halted:
                seen["reason"] = job.cancel_reason
            return "ignored"

        self.client.add(self.type, "gone")
        self.assertEqual(self.worker.drain(), 1)
        self.assertEqual(seen, {"reason": "halted"})

    def test_run_in_a_thread_and_await_the_result(self):
        self.worker.poll_timeout = 0.2
        self.worker.register(self.type, lambda job: job.data["n"] * 2)
        th = threading.Thread(target=self.worker.run, daemon=True)
        th.start()
        self.client.add(self.type, "double", {"n": 21})
        try:
            self.assertEqual(self.client.result(self.type, "double", timeout=10), 42)
        finally:
            self.worker.stop()
            th.join(10)
        self.assertFalse(th.is_alive())


class InlineLifecycle(unittest.TestCase):

    def test_close_stops_the_server_and_removes_its_data(self):
        with InlineClient(support.KVQ_BIN) as client:
            self.assertRegex(client.url, r"^http://127\.0\.0\.1:\d+$")
            self.assertTrue(os.path.isdir(client.data_dir))
            client.put_type("t", timeout=1)
            self.assertFalse(client.closed)
        self.assertTrue(client.closed)
        self.assertFalse(os.path.exists(client.data_dir))
        with self.assertRaises(kvq.NetworkError):
            kvq.Client(client.url, timeout=1).get_type("t")
        client.close()  # a second close does nothing

    def test_a_server_dropped_without_close_is_stopped(self):
        client = InlineClient(support.KVQ_BIN)
        proc, data_dir = client._proc, client.data_dir
        del client
        import gc
        gc.collect()
        self.assertIsNotNone(proc.poll(), "the server outlived its client")
        self.assertFalse(os.path.exists(data_dir))

    def test_the_binary_is_the_argument_then_KVQ_BIN_then_PATH(self):
        saved = {k: os.environ.get(k) for k in ("KVQ_BIN", "PATH")}
        self.addCleanup(lambda: [os.environ.__setitem__(k, v) if v is not None
                                 else os.environ.pop(k, None) for k, v in saved.items()])
        empty = tempfile.mkdtemp(prefix="kvq-py-path-")
        on_path = tempfile.mkdtemp(prefix="kvq-py-path-")
        os.symlink(support.KVQ_BIN, os.path.join(on_path, "kvq"))
        os.environ["PATH"] = empty
        os.environ["KVQ_BIN"] = support.KVQ_BIN
        self.assertEqual(find_kvq(), support.KVQ_BIN)
        os.environ["KVQ_BIN"] = "/nonexistent/kvq"
        self.assertEqual(find_kvq(support.KVQ_BIN), support.KVQ_BIN)
        with self.assertRaises(FileNotFoundError) as cm:
            InlineClient()
        self.assertIn("$KVQ_BIN names (/nonexistent/kvq)", str(cm.exception))
        del os.environ["KVQ_BIN"]
        with self.assertRaises(FileNotFoundError) as cm:
            find_kvq()
        self.assertIn("no kvq binary", str(cm.exception))
        os.environ["PATH"] = on_path
        self.assertEqual(find_kvq(), os.path.join(on_path, "kvq"))
        with InlineClient() as client:  # found on PATH, and it runs
            self.assertEqual(client.put_type("t", timeout=1)["type"], "t")
        not_executable = os.path.join(empty, "kvq")
        with open(not_executable, "w") as f:
            f.write("")
        os.chmod(not_executable, stat.S_IRUSR)
        with self.assertRaises(FileNotFoundError):
            find_kvq(not_executable)

    def test_a_server_that_refuses_its_flags_is_reported_with_its_output(self):
        with self.assertRaises(RuntimeError) as cm:
            InlineClient(support.KVQ_BIN, args=["--listen", "127.0.0.1:0"])
        self.assertIn("leave out --data, --store and --listen", str(cm.exception))

    def test_a_token_reaches_the_server(self):
        with InlineClient(support.KVQ_BIN, args=["--token", "s3cret"], token="s3cret") as client:
            client.put_type("t", timeout=1)
            with self.assertRaises(kvq.Unauthorized):
                kvq.Client(client.url).get_type("t")


if __name__ == "__main__":
    unittest.main()
