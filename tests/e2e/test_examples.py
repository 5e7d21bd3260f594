"""The Python examples in examples/python (which use the kvq package, clients/python) work
against a real server."""

import os
import signal
import subprocess
import sys
import unittest

from kvq_server import ServerTestCase, uniq, wait_until

EXAMPLES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples", "python")
PRODUCER = os.path.join(EXAMPLES, "producer.py")
WORKER = os.path.join(EXAMPLES, "worker.py")


class Examples(ServerTestCase):

    def run_example(self, *args, **kw):
        return subprocess.run([sys.executable, *args], capture_output=True, text=True,
                              timeout=30, **kw)

    def start_worker(self, *args):
        p = subprocess.Popen([sys.executable, WORKER, "--url", self.server.url, *args],
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.addCleanup(lambda: p.poll() is None and p.kill())
        return p

    def stop_worker(self, p, sig):
        p.send_signal(sig)
        out, _ = p.communicate(timeout=10)
        self.assertEqual(p.returncode, 0, out)
        self.assertIn("unregistered", out)
        return out

    def test_help(self):
        for script in (PRODUCER, WORKER):
            with self.subTest(script=script):
                r = self.run_example(script, "--help")
                self.assertEqual(r.returncode, 0, r.stderr)
                self.assertIn("--url", r.stdout)

    def test_producer_then_worker_finishes_all_jobs_and_unregisters_on_sigint(self):
        t = uniq("ex")
        r = self.run_example(PRODUCER, "--url", self.server.url, "--type", t, "--count", "3")
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("added 3 jobs", r.stdout)
        self.assertNotIn("Traceback", r.stderr)
        jobs = self.assertStatus(self.c.get("/v1/jobs/%s" % t), 200)["jobs"]
        self.assertEqual([j["state"] for j in jobs], ["pending"] * 3)

        p = self.start_worker("--type", t, "--id", "exw", "--work-seconds", "0.1")
        wait_until(lambda: [j["state"] for j in self.c.get("/v1/jobs/%s" % t).json["jobs"]]
                   == ["finished"] * 3, 15, 0.05, "the example worker to finish 3 jobs")
        ws = self.assertStatus(self.c.get("/v1/workers/%s" % t), 200)["workers"]
        self.assertEqual([w["id"] for w in ws], ["exw"])
        self.stop_worker(p, signal.SIGINT)
        self.assertEqual(self.c.get("/v1/workers/%s" % t).json["workers"], [])

    def test_producer_waits_for_the_results(self):
        t = uniq("ex")
        self.c.set_timeout(t, 30)
        p = self.start_worker("--type", t, "--id", "exr", "--work-seconds", "0.1",
                              "--concurrency", "2")
        r = self.run_example(PRODUCER, "--url", self.server.url, "--type", t, "--count", "2",
                             "--wait")
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertEqual(r.stdout.count("{'done': True}"), 2, r.stdout)
        self.stop_worker(p, signal.SIGTERM)

    def test_worker_sigterm_gives_its_job_back_at_once(self):
        t = uniq("ex")
        self.c.set_timeout(t, 60)
        self.assertStatus(self.c.add(t, "slow"), 200)
        p = self.start_worker("--type", t, "--id", "slowpoke", "--work-seconds", "60",
                              "--grace", "0.5")
        wait_until(lambda: self.c.job(t, "slow").json["state"] == "running", 10, 0.05,
                   "the example worker to accept the job")
        out = self.stop_worker(p, signal.SIGTERM)
        self.assertIn("handed back %s/slow" % t, out)
        self.assertJobState(t, "slow", "pending")
        job = self.c.job(t, "slow").json
        # handed back as it came, not lost: it counts nothing towards max_lost_runs, nor an
        # attempt, nor an error
        self.assertEqual((job["lost_runs"], job["attempts"], job["errors"], job["data"]),
                         (0, 0, [], {}))
        self.assertEqual(self.c.get("/v1/workers/%s" % t).json["workers"], [])

    def test_a_handler_that_raises_fails_the_job_with_its_traceback(self):
        t = uniq("ex")
        self.assertStatus(self.c.put("/v1/types/%s" % t, {"timeout": 30, "max_attempts": 2,
                                                            "backoff": {"base": 0.1}}), 200)
        self.assertStatus(self.c.add(t, "bad", {"fail": "no such user"}), 200)
        self.assertStatus(self.c.add(t, "good", {"to": "ada"}), 200)
        p = self.start_worker("--type", t, "--id", "exf", "--work-seconds", "0.1")
        wait_until(lambda: self.c.job(t, "bad").json["outcome"] == "dead", 15, 0.05,
                   "the example worker to fail the raising job twice")
        bad = self.c.job(t, "bad").json
        self.assertEqual((bad["state"], bad["attempts"], bad["result"]), ("finished", 2, None))
        self.assertEqual(bad["data"], {"fail": "no such user"})
        self.assertEqual([(e["attempt"], e["kind"], e["message"], e["worker"])
                          for e in bad["errors"]],
                         [(1, "ValueError", "no such user", "exf"),
                          (2, "ValueError", "no such user", "exf")])
        stack = bad["errors"][0]["details"]["stack"]
        self.assertTrue(stack.startswith("Traceback"), stack)
        self.assertIn("in handle", stack)
        self.assertTrue(stack.rstrip().endswith("ValueError: no such user"), stack)
        wait_until(lambda: self.c.job(t, "good").json["state"] == "finished", 15, 0.05,
                   "the example worker to finish the other job")
        good = self.c.job(t, "good").json
        self.assertEqual((good["outcome"], good["result"], good["data"], good["errors"]),
                         ("succeeded", {"done": True}, {"to": "ada"}, []))
        out = self.stop_worker(p, signal.SIGINT)
        self.assertIn("failed %s/bad: retries at " % t, out)
        self.assertIn("failed %s/bad: dead (no such user)\n" % t, out)
        self.assertIn("finished %s/good\n" % t, out)


if __name__ == "__main__":
    unittest.main()
