"""A type's max_lost_runs through kvq serve: set, kept and cleared with PUT and bad values
refused; a job whose runs are lost that many times in a row (its worker goes silent, or its
registered worker dies) is finished with gave_up instead of re-enqueued, its stale worker is
halted, waiters hear it, the metric counts it, and adding it again starts it over."""

import time
import unittest

from kvq_server import ServerTestCase, q, uniq, wait_until

# A type's retry policy and flow control as GET shows them when none was set (kvq/jobs.h
# RetryPolicy's defaults; not paused, no limits).
SETTING_DEFAULTS = {"max_attempts": 25,
                    "backoff": {"base": 1.0, "factor": 2.0, "cap": 3600.0, "jitter": 0.2},
                    "paused": False, "paused_until": None, "max_running": None, "rate": None,
                    "max_running_per_group": None, "has_groups": False}


class MaxLostRuns(ServerTestCase):

    def put_type(self, t, body, status=200, error=None):
        return self.assertStatus(self.c.put("/v1/types/%s" % t, body), status, error)

    def test_max_lost_runs_is_set_kept_cleared_and_checked(self):
        t = uniq("lost")
        body = self.put_type(t, {"timeout": 30, "max_lost_runs": 3})
        self.assertEqual(body, {"type": t, "timeout": 30.0, "finished_retention": None,
                                "max_lost_runs": 3, **SETTING_DEFAULTS})
        # other settings leave it as it is, and it may be changed alone
        body = self.put_type(t, {"timeout": 10, "finished_retention": 60})
        self.assertEqual(body["max_lost_runs"], 3)
        body = self.put_type(t, {"max_lost_runs": 5})
        self.assertEqual(body, {"type": t, "timeout": 10.0, "finished_retention": 60.0,
                                "max_lost_runs": 5, **SETTING_DEFAULTS})
        self.assertEqual(self.assertStatus(self.c.get("/v1/types/%s" % t), 200), body)
        body = self.put_type(t, {"max_lost_runs": None})
        self.assertIsNone(body["max_lost_runs"])
        self.assertEqual(body["finished_retention"], 60.0)
        for bad in (0, -1, 1.5, "3", True, 1000001, [3]):
            r = self.c.put("/v1/types/%s" % t, {"max_lost_runs": bad})
            self.assertStatus(r, 400, "invalid_argument")
            self.assertIn("max_lost_runs", r.json["message"], r)
        self.assertIsNone(self.assertStatus(self.c.get("/v1/types/%s" % t), 200)["max_lost_runs"])
        self.put_type(uniq("absent"), {"max_lost_runs": 3}, 404, "not_found")

    def gave_up_total(self):
        for line in self.c.get("/metrics").body.decode().splitlines():
            if line.startswith("kvq_monitor_gave_up_total "):
                return float(line.split()[1])
        self.fail("no kvq_monitor_gave_up_total in /metrics")

    def test_a_job_whose_worker_goes_silent_twice_is_given_up(self):
        t = uniq("poison")
        self.put_type(t, {"timeout": 0.3, "max_lost_runs": 2})
        self.assertEqual(self.c.add(t, "p", {"n": 1}).status, 200)
        before = self.gave_up_total()

        first = self.assertStatus(self.c.accept(t, worker="w1"), 200)["jobs"][0]
        ev = self.assertStatus(self.c.get("/v1/jobs/%s/p/wait?state=pending&timeout=10" % t), 200)
        self.assertFalse(ev["gave_up"])
        job = self.assertStatus(self.c.job(t, "p"), 200)
        self.assertEqual((job["state"], job["lost_runs"], job["gave_up"]), ("pending", 1, False))

        second = self.assertStatus(self.c.accept(t, worker="w2"), 200)["jobs"][0]
        self.assertEqual(second["id"], "p")
        ev = self.assertStatus(self.c.get("/v1/jobs/%s/p/wait?state=finished&timeout=10" % t), 200)
        self.assertEqual((ev["state"], ev["gave_up"], ev["data"]), ("finished", True, {"n": 1}))
        job = self.assertStatus(self.c.job(t, "p"), 200)
        self.assertEqual((job["state"], job["lost_runs"], job["gave_up"], job["attempts"]),
                         ("finished", 2, True, 2))
        for stale in (first, second):
            r = self.c.post("/v1/jobs/%s/p/finish" % t, {"lock": stale["lock"], "data": {"late": 1}})
            self.assertStatus(r, 409, "halted")
        self.assertEqual(self.c.job(t, "p").json["data"], {"n": 1})
        wait_until(lambda: self.gave_up_total() >= before + 1, 5, message="the metric counted it")

        # added again, it runs again from a count of zero
        self.assertEqual(self.c.add(t, "p", {"n": 2}).status, 200)
        job = self.assertStatus(self.c.job(t, "p"), 200)
        self.assertEqual((job["state"], job["lost_runs"], job["gave_up"]), ("pending", 0, False))

    def test_a_job_whose_registered_worker_dies_is_given_up_at_a_limit_of_one(self):
        t = uniq("fragile")
        wtype = uniq("wt")
        self.put_type(t, {"timeout": 60, "max_lost_runs": 1})
        self.assertEqual(self.c.add(t, "f", {"k": "v"}).status, 200)
        reg = self.assertStatus(self.c.post("/v1/workers/%s" % wtype,
                                            {"id": "dies", "health_timeout": 0.3}), 200)
        self.assertEqual(reg["id"], "dies")
        held = self.assertStatus(self.c.accept(t, worker="dies"), 200)["jobs"][0]
        started = time.monotonic()
        # no heartbeats: the health monitor declares it dead and gives up its job at once
        ev = self.assertStatus(self.c.get("/v1/jobs/%s/f/wait?state=finished&timeout=10" % t), 200)
        self.assertLess(time.monotonic() - started, 10)
        self.assertTrue(ev["gave_up"])
        job = self.assertStatus(self.c.job(t, "f"), 200)
        self.assertEqual((job["state"], job["gave_up"], job["lost_runs"], job["data"]),
                         ("finished", True, 1, {"k": "v"}))
        r = self.c.post("/v1/jobs/%s/f/finish" % t, {"lock": held["lock"]})
        self.assertStatus(r, 409, "halted")


if __name__ == "__main__":
    unittest.main()
