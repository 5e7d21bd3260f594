"""Failures end to end over HTTP: fail and retry, the retry policy, dead jobs and rerun,
cancel, snooze, if_exists, result and progress, the state filters, and bad input."""

import time
import unittest

from kvq_server import ServerTestCase, q, uniq, wait_until

DEFAULT_BACKOFF = {"base": 1.0, "factor": 2.0, "cap": 3600.0, "jitter": 0.2}


def now_ms():
    return int(time.time() * 1000)


class Failures(ServerTestCase):

    def new_type(self, **settings):
        t = uniq("fail")
        body = {"timeout": 30}
        body.update(settings)
        self.assertStatus(self.c.put("/v1/types/%s" % q(t), body), 200)
        return t

    def take(self, t, jid, timeout=None):
        """Accepts one job, which must be `jid`; returns its lock."""
        jobs = self.assertStatus(self.c.accept(t, timeout=timeout), 200)["jobs"]
        self.assertEqual([j["id"] for j in jobs], [jid], jobs)
        return jobs[0]["lock"]

    def call(self, t, jid, verb, body=None):
        return self.c.post("/v1/jobs/%s/%s/%s" % (q(t), q(jid), verb), body)

    def fail(self, t, jid, lock, message="boom", **fields):
        body = {"lock": lock, "error": {"message": message}}
        body.update(fields)
        return self.call(t, jid, "fail", body)

    def listed(self, t, state):
        body = self.assertStatus(self.c.get("/v1/jobs/%s?state=%s" % (q(t), state)), 200)
        return sorted(j["id"] for j in body["jobs"])

    def assertNames(self, r, field, error="invalid_argument"):
        body = self.assertStatus(r, 400, error)
        self.assertIn(field, body["message"], r)

    # -- fail and retry ----------------------------------------------------

    def test_a_job_failing_twice_then_succeeding_keeps_its_errors_input_and_result(self):
        t = self.new_type()
        self.assertStatus(self.c.add(t, "j", {"input": 1}), 200)
        for attempt in (1, 2):
            lock = self.take(t, "j")
            r = self.fail(t, "j", lock, message="try %d" % attempt, retry_in=0,
                          error={"message": "try %d" % attempt, "kind": "db",
                                 "details": {"code": attempt}})
            self.assertEqual(self.assertStatus(r, 200),
                             {"dead": False, "retry_at": r.json["retry_at"], "attempt": attempt})
            self.assertIsInstance(r.json["retry_at"], int, r)
            job = self.assertJobState(t, "j", "pending")
            self.assertIsNone(job["outcome"], job)
        lock = self.take(t, "j")
        self.assertStatus(self.call(t, "j", "update", {"lock": lock, "progress": {"done": 50}}),
                          200)
        self.assertEqual(self.assertJobState(t, "j", "running")["progress"], {"done": 50})
        self.assertEqual(self.assertStatus(
            self.call(t, "j", "finish", {"lock": lock, "result": [1, "two"]}), 200), {})
        job = self.assertJobState(t, "j", "finished")
        self.assertEqual(job["outcome"], "succeeded", job)
        self.assertEqual(job["result"], [1, "two"], job)
        self.assertEqual(job["data"], {"input": 1}, job)
        self.assertEqual(job["attempts"], 3, job)
        self.assertFalse(job["gave_up"], job)
        self.assertEqual([e["attempt"] for e in job["errors"]], [1, 2], job)
        self.assertEqual([e["message"] for e in job["errors"]], ["try 1", "try 2"], job)
        self.assertEqual([e["kind"] for e in job["errors"]], ["db", "db"], job)
        self.assertEqual([e["details"] for e in job["errors"]], [{"code": 1}, {"code": 2}], job)
        self.assertIsInstance(job["started_at"], int, job)
        self.assertIsInstance(job["ended_at"], int, job)
        self.assertGreaterEqual(job["ended_at"], job["started_at"], job)
        # the event of the finished job carries the outcome, result and attempts
        event = self.assertStatus(self.c.get("/v1/jobs/%s/j/wait?timeout=1" % q(t)), 200)
        self.assertEqual((event["state"], event["outcome"], event["result"], event["attempts"]),
                         ("finished", "succeeded", [1, "two"], 3), event)
        self.assertEqual(self.listed(t, "succeeded"), ["j"])

    def test_a_job_dies_after_max_attempts_and_reruns_to_success(self):
        t = self.new_type(max_attempts=2)
        self.assertStatus(self.c.add(t, "d", {"k": "v"}), 200)
        lock = self.take(t, "d")
        self.assertFalse(self.assertStatus(self.fail(t, "d", lock, retry_in=0), 200)["dead"])
        lock = self.take(t, "d")
        self.assertEqual(self.assertStatus(self.fail(t, "d", lock, retry_in=0), 200),
                         {"dead": True, "retry_at": None, "attempt": 2})
        job = self.assertJobState(t, "d", "finished")
        self.assertEqual(job["outcome"], "dead", job)
        self.assertEqual(len(job["errors"]), 2, job)
        self.assertEqual(self.listed(t, "dead"), ["d"])
        self.assertEqual(self.listed(t, "succeeded"), [])
        # no retry left: nothing to accept
        self.assertStatus(self.c.accept(t), 204)
        # a rerun starts its attempts over and keeps its errors and data
        job = self.assertStatus(self.call(t, "d", "rerun"), 200)
        self.assertEqual((job["state"], job["outcome"], job["attempts"]), ("pending", None, 0), job)
        self.assertEqual(len(job["errors"]), 2, job)
        self.assertEqual(job["data"], {"k": "v"}, job)
        self.assertStatus(self.call(t, "d", "rerun"), 409, "wrong_state")
        lock = self.take(t, "d")
        self.assertStatus(self.call(t, "d", "finish", {"lock": lock, "result": "ok"}), 200)
        job = self.assertJobState(t, "d", "finished")
        self.assertEqual((job["outcome"], job["result"], job["attempts"]), ("succeeded", "ok", 1),
                         job)
        self.assertEqual(self.listed(t, "dead"), [])
        self.assertStatus(self.call(t, "absent", "rerun"), 404, "not_found")

    def test_retry_false_ends_the_job_dead_at_once(self):
        t = self.new_type()
        self.assertStatus(self.c.add(t, "x"), 200)
        lock = self.take(t, "x")
        self.assertEqual(self.assertStatus(self.fail(t, "x", lock, retry=False), 200),
                         {"dead": True, "retry_at": None, "attempt": 1})
        self.assertEqual(self.assertJobState(t, "x", "finished")["outcome"], "dead")

    def test_retry_in_is_honoured(self):
        t = self.new_type()
        self.assertStatus(self.c.add(t, "r"), 200)
        lock = self.take(t, "r")
        before = now_ms()
        body = self.assertStatus(self.fail(t, "r", lock, retry_in=1.5), 200)
        self.assertFalse(body["dead"], body)
        self.assertGreaterEqual(body["retry_at"], before + 1500, body)
        self.assertLessEqual(body["retry_at"], now_ms() + 1500, body)
        self.assertEqual(self.listed(t, "scheduled"), ["r"])
        self.assertEqual(self.listed(t, "due"), [])
        self.assertStatus(self.c.accept(t), 204)
        self.take(t, "r", timeout=10)
        self.assertGreaterEqual(now_ms(), body["retry_at"], "accepted before its retry time")

    def test_the_types_backoff_schedules_the_retry(self):
        t = self.new_type(backoff={"base": 2, "jitter": 0})
        self.assertStatus(self.c.add(t, "b"), 200)
        lock = self.take(t, "b")
        before = now_ms()
        body = self.assertStatus(self.fail(t, "b", lock), 200)
        self.assertGreaterEqual(body["retry_at"], before + 2000, body)
        self.assertLessEqual(body["retry_at"], now_ms() + 2000, body)

    def test_a_stale_locks_fail_is_halted(self):
        t = uniq("stale")
        self.assertStatus(self.c.put("/v1/types/%s" % q(t), {"timeout": 0.5}), 200)
        self.assertStatus(self.c.add(t, "s"), 200)
        old = self.take(t, "s")
        # the run is lost (no update within the timeout): the job is pending again
        wait_until(lambda: self.c.job(t, "s").json["state"] == "pending", 15,
                   message="the lost run to be re-enqueued")
        job = self.c.job(t, "s").json
        self.assertEqual([e["kind"] for e in job["errors"]], ["timeout"], job)
        self.assertStatus(self.fail(t, "s", old), 409, "halted")
        self.assertStatus(self.call(t, "s", "snooze", {"lock": old}), 409, "halted")
        new = self.take(t, "s")
        self.assertStatus(self.fail(t, "s", old), 409, "halted")
        self.assertStatus(self.fail(t, "s", new, retry_in=0), 200)
        self.assertEqual(len(self.c.job(t, "s").json["errors"]), 2)

    def test_snooze_hands_the_job_back_without_counting_the_attempt(self):
        t = self.new_type()
        self.assertStatus(self.c.add(t, "z"), 200)
        lock = self.take(t, "z")
        at = now_ms() + 3600000
        self.assertEqual(self.assertStatus(
            self.call(t, "z", "snooze", {"lock": lock, "scheduled_time": at}), 200), {})
        job = self.assertJobState(t, "z", "pending")
        self.assertEqual((job["scheduled_time"], job["attempts"], job["errors"]), (at, 0, []), job)
        self.assertEqual(self.listed(t, "scheduled"), ["z"])
        # the run is over: a heartbeat with its lock is halted (a repeated snooze is a retry of
        # the one that committed, and answers as it did)
        self.assertStatus(self.call(t, "z", "update", {"lock": lock}), 409, "halted")
        self.assertStatus(self.call(t, "z", "snooze", {"lock": lock}), 200)
        self.assertEqual(self.c.job(t, "z").json["attempts"], 0)

    def test_a_snoozed_or_failed_runs_lock_is_halted_by_every_other_call(self):
        # The run ended: its lock passes only a retry of the call that ended it. A finish or a
        # fail with the lock of a run that was snoozed (or failed) is a stale worker's: 409
        # halted, naming what ended the run, and the job is left as the snooze left it.
        t = self.new_type()
        self.assertStatus(self.c.add(t, "z"), 200)
        lock = self.take(t, "z")
        at = now_ms() + 3600000
        self.assertStatus(self.call(t, "z", "snooze", {"lock": lock, "scheduled_time": at}), 200)
        before = self.assertJobState(t, "z", "pending")
        finish = self.assertStatus(self.call(t, "z", "finish", {"lock": lock, "result": 1}), 409,
                                   "halted")
        self.assertIn("was already snoozed with this lock", finish["message"], finish)
        self.assertStatus(self.fail(t, "z", lock), 409, "halted")
        self.assertStatus(self.call(t, "z", "finish", {"lock": lock, "next": {}}), 409, "halted")
        self.assertEqual(self.c.job(t, "z").json, before)

        self.assertStatus(self.c.add(t, "f"), 200)
        lock = self.take(t, "f")
        self.assertStatus(self.fail(t, "f", lock, retry_in=3600), 200)
        before = self.assertJobState(t, "f", "pending")
        finish = self.assertStatus(self.call(t, "f", "finish", {"lock": lock}), 409, "halted")
        self.assertIn("was already failed with this lock", finish["message"], finish)
        self.assertStatus(self.call(t, "f", "snooze", {"lock": lock}), 409, "halted")
        self.assertEqual(self.assertStatus(self.fail(t, "f", lock, retry_in=3600), 200)["attempt"],
                         1, "a retry of the fail answers as it did")
        self.assertEqual(self.c.job(t, "f").json, before)

    # -- if_exists ---------------------------------------------------------

    def test_if_exists_keep_leaves_an_existing_job_alone(self):
        t = self.new_type()
        self.assertEqual(self.assertStatus(self.c.add(t, "k", {"v": 1}, if_exists="keep"), 200),
                         {"id": "k", "added": True})
        self.assertEqual(self.assertStatus(self.c.add(t, "k", {"v": 2}, if_exists="keep"), 200),
                         {"id": "k", "added": False})
        self.assertEqual(self.c.job(t, "k").json["data"], {"v": 1})
        # the default still replaces
        self.assertEqual(self.assertStatus(self.c.add(t, "k", {"v": 3}), 200),
                         {"id": "k", "added": True})
        self.assertEqual(self.c.job(t, "k").json["data"], {"v": 3})
        # a running job is not resubmitted by a keep
        lock = self.take(t, "k")
        self.assertFalse(self.assertStatus(self.c.add(t, "k", {"v": 4}, if_exists="keep"),
                                           200)["added"])
        job = self.assertJobState(t, "k", "running")
        self.assertFalse(job["resubmitted"], job)
        self.assertStatus(self.call(t, "k", "finish", {"lock": lock}), 200)
        self.assertEqual(self.assertJobState(t, "k", "finished")["data"], {"v": 3})

    def test_batch_if_exists_keep_answers_what_it_kept(self):
        t = self.new_type()
        self.assertStatus(self.c.add(t, "a", {"v": 1}), 200)
        self.assertStatus(self.c.add(t, "b", {"v": 1}), 200)
        batch = {"if_exists": "keep",
                 "jobs": [{"id": "a", "data": {"v": 2}},
                          {"id": "n", "data": {"v": 2}},
                          {"id": "b", "data": {"v": 2}, "if_exists": "update"}]}
        body = self.assertStatus(self.c.post("/v1/jobs/%s/batch" % q(t), batch), 200)
        self.assertEqual(body, {"added": 2, "kept": ["a"]})
        self.assertEqual(self.c.job(t, "a").json["data"], {"v": 1})
        self.assertEqual(self.c.job(t, "b").json["data"], {"v": 2})
        self.assertEqual(self.c.job(t, "n").json["data"], {"v": 2})
        body = self.assertStatus(self.c.post("/v1/jobs/%s/batch" % q(t),
                                             {"jobs": [{"id": "a", "data": {}}]}), 200)
        self.assertEqual(body, {"added": 1, "kept": []})

    # -- cancel ------------------------------------------------------------

    def test_cancel_a_pending_and_a_running_job(self):
        t = self.new_type()
        self.assertStatus(self.c.add(t, "p", scheduled_time=now_ms() + 3600000), 200)
        job = self.assertStatus(self.call(t, "p", "cancel"), 200)
        self.assertEqual((job["state"], job["outcome"]), ("finished", "cancelled"), job)
        self.assertStatus(self.call(t, "p", "cancel"), 409, "wrong_state")
        self.assertStatus(self.c.add(t, "r"), 200)
        lock = self.take(t, "r")
        job = self.assertStatus(self.call(t, "r", "cancel"), 200)
        self.assertEqual((job["state"], job["outcome"]), ("finished", "cancelled"), job)
        halted = self.assertStatus(self.call(t, "r", "finish", {"lock": lock}), 409, "halted")
        self.assertIn("'%s' was cancelled" % t, halted["message"], halted)
        self.assertStatus(self.call(t, "r", "update", {"lock": lock}), 409, "halted")
        self.assertEqual(self.assertJobState(t, "r", "finished")["outcome"], "cancelled")
        self.assertEqual(self.listed(t, "cancelled"), ["p", "r"])
        self.assertStatus(self.call(t, "absent", "cancel"), 404, "not_found")
        self.assertStatus(self.call(t, "p", "cancel", {"now": True}), 400, "unknown_field")

    def test_rerun_all_dead_or_cancelled_jobs_of_a_type(self):
        t = self.new_type()
        for jid in ("d1", "d2", "ok"):
            self.assertStatus(self.c.add(t, jid), 200)
        for _ in range(3):
            job = self.assertStatus(self.c.accept(t), 200)["jobs"][0]
            if job["id"] == "ok":
                self.assertStatus(self.call(t, "ok", "finish", {"lock": job["lock"]}), 200)
            else:
                self.assertStatus(self.fail(t, job["id"], job["lock"], retry=False), 200)
        self.assertStatus(self.c.add(t, "c"), 200)
        self.assertStatus(self.call(t, "c", "cancel"), 200)
        self.assertEqual(self.listed(t, "dead"), ["d1", "d2"])
        r = self.c.post("/v1/types/%s/rerun" % q(t))
        self.assertEqual(self.assertStatus(r, 200), {"rerun": 2})
        self.assertEqual(self.listed(t, "dead"), [])
        self.assertEqual(self.listed(t, "pending"), ["d1", "d2"])
        self.assertEqual(self.listed(t, "succeeded"), ["ok"])
        r = self.c.post("/v1/types/%s/rerun" % q(t), {"outcome": "cancelled"})
        self.assertEqual(self.assertStatus(r, 200), {"rerun": 1})
        self.assertEqual(self.listed(t, "pending"), ["c", "d1", "d2"])
        self.assertNames(self.c.post("/v1/types/%s/rerun" % q(t), {"outcome": "succeeded"}),
                         "outcome")
        self.assertNames(self.c.post("/v1/types/%s/rerun" % q(t), {"outcome": "bogus"}),
                         "outcome")
        self.assertStatus(self.c.post("/v1/types/%s/rerun" % q(uniq("absent"))), 404,
                          "not_found")

    # -- the retry policy --------------------------------------------------

    def test_type_retry_settings_round_trip(self):
        t = self.new_type()
        body = self.assertStatus(self.c.get("/v1/types/%s" % q(t)), 200)
        self.assertEqual((body["max_attempts"], body["backoff"]), (25, DEFAULT_BACKOFF), body)
        body = self.assertStatus(self.c.put("/v1/types/%s" % q(t),
                                            {"max_attempts": 5, "backoff": {"base": 0.5}}), 200)
        want = dict(DEFAULT_BACKOFF, base=0.5)
        self.assertEqual((body["max_attempts"], body["backoff"], body["timeout"]),
                         (5, want, 30.0), body)
        body = self.assertStatus(self.c.put("/v1/types/%s" % q(t),
                                            {"backoff": {"factor": 3, "cap": 60, "jitter": 0}}),
                                 200)
        want = {"base": 0.5, "factor": 3.0, "cap": 60.0, "jitter": 0.0}
        self.assertEqual((body["max_attempts"], body["backoff"]), (5, want), body)
        self.assertEqual(self.assertStatus(self.c.get("/v1/types/%s" % q(t)), 200), body)
        # a change of the timeout keeps the policy
        body = self.assertStatus(self.c.put("/v1/types/%s" % q(t), {"timeout": 10}), 200)
        self.assertEqual((body["max_attempts"], body["backoff"]), (5, want), body)
        self.assertStatus(self.c.put("/v1/types/%s" % q(uniq("absent")), {"max_attempts": 3}),
                          404, "not_found")

    def test_bad_retry_settings_are_refused_naming_the_field(self):
        t = self.new_type()
        path = "/v1/types/%s" % q(t)
        self.assertNames(self.c.put(path, {"max_attempts": 0}), "max_attempts")
        self.assertNames(self.c.put(path, {"max_attempts": "3"}), "max_attempts")
        self.assertNames(self.c.put(path, {"backoff": 5}), "backoff")
        self.assertNames(self.c.put(path, {"backoff": {"base": -1}}), "base")
        self.assertNames(self.c.put(path, {"backoff": {"factor": 0.5}}), "factor")
        self.assertNames(self.c.put(path, {"backoff": {"jitter": 2}}), "jitter")
        self.assertNames(self.c.put(path, {"backoff": {"base": 10, "cap": 5}}), "cap")
        self.assertNames(self.c.put(path, {"backoff": {"bogus": 1}}), "bogus", "unknown_field")
        body = self.assertStatus(self.c.get(path), 200)
        self.assertEqual((body["max_attempts"], body["backoff"]), (25, DEFAULT_BACKOFF), body)

    # -- bad input ---------------------------------------------------------

    def test_bad_worker_calls_are_refused_naming_the_field(self):
        t = self.new_type()
        self.assertStatus(self.c.add(t, "j"), 200)
        lock = self.take(t, "j")
        self.assertNames(self.call(t, "j", "fail", {"lock": lock}), "error")
        self.assertNames(self.call(t, "j", "fail", {"lock": lock, "error": "boom"}), "error")
        self.assertNames(self.fail(t, "j", lock, message=""), "message")
        self.assertNames(self.call(t, "j", "fail", {"lock": lock, "error": {"kind": "x"}}),
                         "message")
        self.assertNames(self.call(t, "j", "fail", {"lock": lock, "error": {"message": 7}}),
                         "message")
        self.assertNames(self.fail(t, "j", lock, retry_in=-1), "retry_in")
        self.assertNames(self.fail(t, "j", lock, retry_in="soon"), "retry_in")
        self.assertNames(self.fail(t, "j", lock, retry="no"), "retry")
        self.assertNames(self.fail(t, "j", lock, data={}), "data", "unknown_field")
        self.assertNames(self.call(t, "j", "fail", {"lock": lock,
                                                    "error": {"message": "m", "stack": "s"}}),
                         "stack", "unknown_field")
        self.assertNames(self.call(t, "j", "fail", {"error": {"message": "m"}}), "lock")
        self.assertNames(self.call(t, "j", "snooze", {"lock": lock, "delay": -1}), "delay")
        self.assertNames(self.call(t, "j", "snooze", {"lock": lock, "scheduled_time": "x"}),
                         "scheduled_time")
        self.assertNames(self.call(t, "j", "finish", {"lock": lock, "progress": 1}), "progress",
                         "unknown_field")
        self.assertNames(self.call(t, "j", "update", {"lock": lock, "result": 1}), "result",
                         "unknown_field")
        # none of it changed the job
        job = self.assertJobState(t, "j", "running")
        self.assertEqual((job["attempts"], job["errors"]), (1, []), job)

    def test_bad_producer_input_is_refused_naming_the_field(self):
        t = self.new_type()
        self.assertNames(self.c.add(t, "j", if_exists="maybe"), "if_exists")
        self.assertNames(self.c.add(t, "j", if_exists=True), "if_exists")
        batch = "/v1/jobs/%s/batch" % q(t)
        self.assertNames(self.c.post(batch, {"jobs": [{"id": "j"}], "if_exists": "no"}),
                         "if_exists")
        self.assertNames(self.c.post(batch, {"jobs": [{"id": "j", "if_exists": "no"}]}),
                         "if_exists")
        self.assertStatus(self.c.job(t, "j"), 404, "not_found")
        self.assertNames(self.c.get("/v1/jobs/%s?state=bogus" % q(t)), "state")
        self.assertStatus(self.c.add(t, "f"), 200)
        self.assertNames(self.call(t, "f", "rerun", {"priority": "high"}), "priority")
        self.assertNames(self.call(t, "f", "rerun", {"data": {}}), "data", "unknown_field")


if __name__ == "__main__":
    unittest.main()
