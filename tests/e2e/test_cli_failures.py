"""Failures through the real `kvq` binary against a real `kvq serve`: fail (retried after the
type's backoff or --retry-in, dead with --no-retry or when attempts run out), the errors a job
keeps, rerun (one job, all dead, all cancelled), cancel, snooze, ls --state for the new states,
add --if-exists keep, the result and progress kept apart from the data, a type's retry policy
(types set / get), and the exit codes: 4 for a stale lock, 2 for a bad option or a job in the
wrong state, 5 for a missing job to rerun or cancel."""

import json
import time
import unittest

from kvq_server import uniq, wait_until
from test_cli import CliTestCase, key_values, table


class Failures(CliTestCase):

    def setUp(self):
        super().setUp()
        self.t = self.new_type("fail")

    def accept(self, t=None):
        return self.accept_one(t or self.t)

    def test_a_job_that_fails_twice_then_succeeds_keeps_both_errors_and_its_input(self):
        t = self.t
        self.ok("types", "set", t, "--max-attempts", "5", "--backoff-base", "0.2",
                "--backoff-jitter", "0")
        self.ok("add", t, "j", '{"to": "ada"}')
        _, lock = self.accept()
        before = int(time.time() * 1000)
        r = self.ok("fail", t, "j", "--lock", lock, "--message", "smtp down", "--kind", "IOError",
                    "--details", '{"stack": "line 1"}')
        self.assertTrue(r.stdout.startswith("failed %s/j: attempt 1 failed; retries at " % t),
                        r.stdout)
        job = self.assertJobState(t, "j", "pending")
        # the type's backoff: 0.2 s after the first failure, without jitter
        self.assertGreaterEqual(job["scheduled_time"], before + 200)
        self.assertLess(job["scheduled_time"], before + 200 + 5000)

        _, lock = self.accept()  # waits for the retry to become due
        answer = self.ok_json("fail", t, "j", "--lock", lock, "--message", "still down",
                              "--retry-in", "0.1")
        self.assertEqual((answer["dead"], answer["attempt"]), (False, 2), answer)
        self.assertIsInstance(answer["retry_at"], int)

        _, lock = self.accept()
        r = self.ok("finish", t, "j", "--lock", lock, '{"sent": true}')
        self.assertEqual(r.stdout.strip(), "finished %s/j" % t)
        job = self.ok_json("get", t, "j")
        self.assertEqual((job["state"], job["outcome"]), ("finished", "succeeded"))
        self.assertEqual(job["data"], {"to": "ada"})
        self.assertEqual(job["result"], {"sent": True})
        self.assertEqual([(e["attempt"], e["kind"], e["message"]) for e in job["errors"]],
                         [(1, "IOError", "smtp down"), (2, "error", "still down")])
        self.assertEqual(job["errors"][0]["details"], {"stack": "line 1"})

        r = self.ok("get", t, "j")
        fields = key_values(r.stdout)
        self.assertEqual(fields.get("outcome"), "succeeded", r.stdout)
        self.assertEqual(json.loads(fields["data"]), {"to": "ada"})
        self.assertEqual(json.loads(fields["result"]), {"sent": True})
        error_lines = [line.strip() for line in r.stdout.splitlines() if line.startswith("  #")]
        self.assertEqual(len(error_lines), 2, r.stdout)
        self.assertTrue(error_lines[0].startswith("#1  "), error_lines)
        self.assertTrue(error_lines[0].endswith("  IOError: smtp down"), error_lines)
        self.assertTrue(error_lines[1].endswith("  error: still down"), error_lines)
        _, rows = table(self.ok("ls", t, "--state", "succeeded").stdout)
        self.assertEqual([(row[0], row[1], row[2]) for row in rows], [("j", "finished", "succeeded")])

    def test_a_job_out_of_attempts_ends_dead_and_rerun_all_dead_runs_it_again(self):
        t = self.t
        self.ok("types", "set", t, "--max-attempts", "2", "--backoff-base", "0.05")
        self.ok("add", t, "d", '{"n": 1}')
        self.ok("add", t, "ok", '{"n": 2}')
        jid, lock = self.accept()
        self.assertEqual(jid, "d")
        self.ok("fail", t, "d", "--lock", lock, "--message", "first")
        jid, lock = self.accept()  # "ok" (due since it was added) comes first
        self.assertEqual(jid, "ok")
        self.ok("finish", t, "ok", "--lock", lock)
        jid, lock = self.accept()
        self.assertEqual(jid, "d")
        r = self.ok("fail", t, "d", "--lock", lock, "--message", "second")
        self.assertEqual(r.stdout.strip(), "failed %s/d: attempt 2 failed; the job is dead" % t)
        job = self.ok_json("get", t, "d")
        self.assertEqual((job["state"], job["outcome"], job["attempts"]), ("finished", "dead", 2))

        _, rows = table(self.ok("ls", t, "--state", "dead").stdout)
        self.assertEqual([(row[0], row[2]) for row in rows], [("d", "dead")])
        self.assertEqual([j["id"] for j in self.ok_json("ls", t, "--state", "dead")["jobs"]], ["d"])

        r = self.ok("rerun", t, "--all-dead")
        self.assertEqual(r.stdout.strip(), "rerun 1 dead jobs of %s" % t)
        job = self.assertJobState(t, "d", "pending")
        self.assertEqual((job["outcome"], job["attempts"], job["data"]), (None, 0, {"n": 1}))
        self.assertEqual([e["message"] for e in job["errors"]], ["first", "second"])  # kept
        self.assertEqual(self.ok_json("ls", t, "--state", "dead")["jobs"], [])
        self.assertEqual(self.ok_json("rerun", t, "--all-dead"), {"rerun": 0})

        # rerun of a job that is not finished: 409 wrong_state, exit 2
        r = self.assertExit(self.kvq("rerun", t, "d"), 2)
        self.assertIn("wrong_state", r.stderr)
        r = self.assertExit(self.kvq("rerun", t, "missing"), 5)

    def test_no_retry_is_dead_at_once_and_rerun_one_job_starts_it_over(self):
        t = self.t
        self.ok("add", t, "n", '{"k": "v"}')
        _, lock = self.accept()
        answer = self.ok_json("fail", t, "n", "--lock", lock, "--message", "bad input",
                              "--no-retry")
        self.assertEqual((answer["dead"], answer["retry_at"], answer["attempt"]), (True, None, 1))
        r = self.ok("rerun", t, "n")
        self.assertEqual(r.stdout.strip(), "rerun %s/n" % t)
        job = self.assertJobState(t, "n", "pending")
        self.assertEqual((job["attempts"], job["data"], job["result"]), (0, {"k": "v"}, None))
        _, lock = self.accept()
        self.ok("finish", t, "n", "--lock", lock, '"done"')
        job = self.ok_json("get", t, "n")
        self.assertEqual((job["outcome"], job["result"], job["attempts"]), ("succeeded", "done", 1))

    def test_cancel_a_pending_and_a_running_job(self):
        t = self.t
        self.ok("add", t, "p", '{"a": 1}')
        r = self.ok("cancel", t, "p")
        self.assertEqual(r.stdout.strip(), "cancelled %s/p" % t)
        job = self.assertJobState(t, "p", "finished")
        self.assertEqual((job["outcome"], job["data"]), ("cancelled", {"a": 1}))
        # a finished job cannot be cancelled: 409 wrong_state, exit 2
        r = self.assertExit(self.kvq("cancel", t, "p"), 2)
        self.assertIn("wrong_state", r.stderr)
        self.assertExit(self.kvq("cancel", t, "nope"), 5)

        self.ok("add", t, "r")
        jid, lock = self.accept()
        self.assertEqual(jid, "r")
        self.assertEqual(self.ok_json("cancel", t, "r")["outcome"], "cancelled")
        # its worker is halted
        r = self.assertExit(self.kvq("finish", t, "r", "--lock", lock), 4)
        self.assertIn("halted", r.stderr)
        self.assertEqual([j["id"] for j in self.ok_json("ls", t, "--state", "cancelled")["jobs"]],
                         ["p", "r"])
        r = self.ok("rerun", t, "--all-cancelled")
        self.assertEqual(r.stdout.strip(), "rerun 2 cancelled jobs of %s" % t)
        self.assertEqual([j["state"] for j in self.ok_json("ls", t)["jobs"]], ["pending"] * 2)

    def test_snooze_hands_the_job_back_without_counting_the_attempt(self):
        t = self.t
        self.ok("add", t, "s")
        _, lock = self.accept()
        self.assertEqual(self.assertJobState(t, "s", "running")["attempts"], 1)
        before = int(time.time() * 1000)
        r = self.ok("snooze", t, "s", "--lock", lock, "--delay", "60")
        self.assertEqual(r.stdout.strip(), "snoozed %s/s" % t)
        job = self.assertJobState(t, "s", "pending")
        self.assertEqual((job["attempts"], job["errors"]), (0, []))
        self.assertGreaterEqual(job["scheduled_time"], before + 60000)
        self.assertEqual([j["id"] for j in self.ok_json("ls", t, "--state", "scheduled")["jobs"]],
                         ["s"])
        self.assertEqual(self.ok_json("ls", t, "--state", "due")["jobs"], [])
        # the run is over: an update with its lock is halted (a repeated snooze is a retry of
        # the one that committed, and answers as it did)
        r = self.assertExit(self.kvq("update", t, "s", "--lock", lock), 4)
        self.assertIn("halted", r.stderr)
        self.ok("snooze", t, "s", "--lock", lock)
        self.assertEqual(self.c.job(t, "s").json["attempts"], 0)
        r = self.assertExit(self.kvq("snooze", t, "s", "--lock", lock, "--delay", "1", "--at", "5"),
                            2)
        self.assertIn("give --delay or --at, not both", r.stderr)

    def test_exit_codes_of_fail(self):
        t = self.t
        self.ok("add", t, "e", '{"v": 1}')
        _, old = self.accept()
        self.ok("rm", t, "e")
        self.ok("add", t, "e", '{"v": 2}')
        _, new = self.accept()
        # a stale lock: 409 halted, exit 4, and the job's run goes on
        r = self.assertExit(self.kvq("fail", t, "e", "--lock", old, "--message", "m"), 4)
        self.assertIn("halted", r.stderr)
        self.assertEqual(r.stdout, "")
        self.assertEqual(self.assertJobState(t, "e", "running")["errors"], [])
        # rejected before anything is sent: exit 2, the job untouched
        for bad, message in (
                (("--retry-in", "soon"), "--retry-in needs a number of seconds >= 0, not 'soon'"),
                (("--retry-in", "-3"), "--retry-in needs a number of seconds >= 0, not '-3'"),
                (("--retry-in", "1", "--no-retry"), "give --retry-in or --no-retry, not both"),
                (("--details", "{nope"), "--details is not valid JSON")):
            with self.subTest(bad=bad):
                r = self.assertExit(
                    self.kvq("fail", t, "e", "--lock", new, "--message", "m", *bad), 2)
                self.assertIn(message, r.stderr)
        r = self.assertExit(self.kvq("fail", t, "e", "--lock", new), 2)
        self.assertIn("--message is required", r.stderr)
        self.assertEqual(self.assertJobState(t, "e", "running")["errors"], [])
        # a fail for a job that is gone is halted too, as a finish is: the run has no job left
        r = self.assertExit(self.kvq("fail", t, "missing", "--lock", new, "--message", "m"), 4)
        self.assertIn("was removed", r.stderr)
        # and a well-formed fail with the same lock still works
        self.ok("fail", t, "e", "--lock", new, "--message", "m", "--retry-in", "0")
        self.assertJobState(t, "e", "pending")


class ResultsProgressAndAdds(CliTestCase):

    def setUp(self):
        super().setUp()
        self.t = self.new_type("res")

    def test_update_progress_and_finish_result_keep_the_data(self):
        t = self.t
        self.ok("add", t, "j", '{"to": "grace"}')
        _, lock = self.accept_one(t)
        self.ok("update", t, "j", "--lock", lock, '{"pct": 50}')
        job = self.assertJobState(t, "j", "running")
        self.assertEqual((job["progress"], job["data"]), ({"pct": 50}, {"to": "grace"}))
        self.ok("update", t, "j", "--lock", lock, "--progress", "75")
        self.assertEqual(self.c.job(t, "j").json["progress"], 75)
        self.ok("update", t, "j", "--lock", lock, "--data", '{"to": "grace", "tries": 1}')
        self.assertEqual(self.c.job(t, "j").json["data"], {"to": "grace", "tries": 1})
        self.ok("finish", t, "j", "--lock", lock, '{"id": "msg-1"}', "--data", '{"to": "g"}')
        job = self.assertJobState(t, "j", "finished")
        self.assertEqual((job["result"], job["data"]), ({"id": "msg-1"}, {"to": "g"}))
        r = self.assertExit(self.kvq("update", t, "j", "--lock", lock, "1", "--progress", "2"), 2)
        self.assertIn("give PROGRESS_JSON or --progress, not both", r.stderr)

    def test_add_if_exists_keep_leaves_the_job_alone(self):
        t = self.t
        r = self.ok("add", t, "k", '{"v": 1}', "--if-exists", "keep")
        self.assertEqual(r.stdout.strip(), "added %s/k" % t)
        _, lock = self.accept_one(t)
        self.ok("finish", t, "k", "--lock", lock, '"r"')
        r = self.ok("add", t, "k", '{"v": 2}', "--if-exists", "keep")
        self.assertEqual(r.stdout.strip(),
                         "kept %s/k (it exists; --if-exists keep left it alone)" % t)
        self.assertEqual(self.ok_json("add", t, "k", "--if-exists", "keep"),
                         {"id": "k", "added": False})
        job = self.assertJobState(t, "k", "finished")
        self.assertEqual((job["data"], job["result"]), ({"v": 1}, "r"))
        # the default (update) starts a finished job over
        r = self.ok("add", t, "k", '{"v": 3}')
        self.assertEqual(r.stdout.strip(), "added %s/k" % t)
        job = self.assertJobState(t, "k", "pending")
        self.assertEqual((job["data"], job["result"], job["outcome"]), ({"v": 3}, None, None))
        r = self.assertExit(self.kvq("add", t, "k", "--if-exists", "never"), 2)
        self.assertIn("--if-exists takes update or keep, not 'never'", r.stderr)

    def test_types_set_and_get_the_retry_policy(self):
        t = self.t
        r = self.ok("types", "get", t)
        fields = key_values(r.stdout)
        self.assertEqual(fields.get("max_attempts"), "25", r.stdout)  # the documented default
        self.assertEqual(fields.get("backoff"), "1s x2 cap 3600s jitter 0.2", r.stdout)
        body = self.ok_json("types", "set", t, "--max-attempts", "3", "--backoff-cap", "10")
        self.assertEqual((body["max_attempts"], body["backoff"]),
                         (3, {"base": 1.0, "factor": 2.0, "cap": 10.0, "jitter": 0.2}))
        r = self.ok("types", "set", t, "--backoff-factor", "3")
        fields = key_values(r.stdout)
        self.assertEqual((fields.get("max_attempts"), fields.get("backoff")),
                         ("3", "1s x3 cap 10s jitter 0.2"), r.stdout)
        header, rows = table(self.ok("types").stdout)
        self.assertEqual(header[-6:-4], ["MAX-ATTEMPTS", "BACKOFF"])
        row = next(row for row in rows if row[0] == t)
        self.assertEqual(row[-11:-4], ["3", "1s", "x3", "cap", "10s", "jitter", "0.2"])
        for bad in (("--max-attempts", "x"), ("--backoff-base", "-1"), ()):
            with self.subTest(bad=bad):
                self.assertExit(self.kvq("types", "set", t, *bad), 2)
        # values only the server judges (max_attempts 0) are refused by it: 400, exit 2
        self.assertExit(self.kvq("types", "set", t, "--max-attempts", "0"), 2)
        self.assertEqual(self.ok_json("types", "get", t)["max_attempts"], 3)
        self.assertExit(self.kvq("types", "get", uniq("none")), 5)


if __name__ == "__main__":
    unittest.main()
