"""The `kvq` client commands against a real `kvq serve`: what each prints (text and --json),
their exit codes (0 ok, 1 server/network error, 2 usage error or a request the server refused
(4xx), 3 nothing in time, 4 halted, 5 not found), types with timeouts and finished-job
retention, removing a type's jobs, the worker flow (accept, update, finish and their locks),
wait, top, bench (which leaves the server's types as it found them), usage and network errors,
and --token."""

import json
import os
import signal
import subprocess
import time
import unittest

from kvq_server import KVQ_BIN, ServerTestCase, q, uniq

# A type's retry policy and flow control as GET shows them when none was set (kvq/jobs.h
# RetryPolicy's defaults; not paused, no limits).
SETTING_DEFAULTS = {"max_attempts": 25,
                    "backoff": {"base": 1.0, "factor": 2.0, "cap": 3600.0, "jitter": 0.2},
                    "paused": False, "paused_until": None, "max_running": None, "rate": None,
                    "max_running_per_group": None, "has_groups": False}

CRASH_SIGNS = ("Traceback", "terminate called", "Segmentation fault", "Aborted", "core dumped")


def run_kvq(*args, url=None, token=None, input=None, timeout=20):
    """Runs `kvq ARGS --url URL [--token T]`, without $KVQ_URL/$KVQ_TOKEN from the
    environment. Returns the CompletedProcess."""
    cmd = [KVQ_BIN] + [str(a) for a in args]
    if url is not None:
        cmd += ["--url", url]
    if token is not None:
        cmd += ["--token", token]
    env = dict(os.environ)
    env.pop("KVQ_URL", None)
    env.pop("KVQ_TOKEN", None)
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env,
                          input=input)


def key_values(text):
    """`key: value` lines (kvq get / accept) as a dict of stripped strings."""
    out = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep:
            out[key.strip()] = value.strip()
    return out


def table(text):
    """A kvq table: (header cells, [row cells]), cells split on runs of whitespace."""
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines:
        raise AssertionError("no table in %r" % text)
    return lines[0].split(), [line.split() for line in lines[1:]]


class CliTestCase(ServerTestCase):

    def kvq(self, *args, **kw):
        kw.setdefault("url", self.server.url)
        return run_kvq(*args, **kw)

    def assertExit(self, r, code):
        """Checks the exit code (showing the output when it is wrong) and that the
        process did not crash."""
        self.assertEqual(r.returncode, code,
                         "exit %d, wanted %d: %s\nstdout: %r\nstderr: %r"
                         % (r.returncode, code, r.args, r.stdout, r.stderr))
        for sign in CRASH_SIGNS:
            self.assertNotIn(sign, r.stderr)
        return r

    def ok(self, *args, **kw):
        return self.assertExit(self.kvq(*args, **kw), 0)

    def ok_json(self, *args, **kw):
        r = self.ok(*(args + ("--json",)), **kw)
        try:
            return json.loads(r.stdout)
        except ValueError:
            self.fail("--json printed no JSON: %r" % r.stdout)

    def new_type(self, prefix="cli", timeout=30):
        t = uniq(prefix)
        self.c.set_timeout(t, timeout)
        return t

    def accept_one(self, t):
        """Accepts the (only) due job of t with the CLI; returns (id, lock)."""
        body = self.ok_json("accept", t, "--timeout", "5")
        self.assertEqual(len(body["jobs"]), 1, body)
        job = body["jobs"][0]
        self.assertEqual(job["type"], t, body)
        return job["id"], job["lock"]


class TypesTimeoutsAndRetention(CliTestCase):

    def test_timeout_set_print_and_clear(self):
        t = uniq("to")
        r = self.ok("timeout", t, "30")
        self.assertEqual(r.stdout.strip(), "%s: timeout 30s" % t)
        self.assertEqual(self.assertStatus(self.c.get("/v1/types/%s" % t), 200)["timeout"], 30.0)
        r = self.ok("timeout", t, "2.5")
        self.assertEqual(r.stdout.strip(), "%s: timeout 2.5s" % t)
        r = self.ok("timeout", t)
        self.assertEqual(r.stdout.strip(), "%s: timeout 2.5s" % t)
        self.assertEqual(self.ok_json("timeout", t),
                         dict({"type": t, "timeout": 2.5, "finished_retention": None, "max_lost_runs": None}, **SETTING_DEFAULTS))
        r = self.ok("timeout", t, "--clear")
        self.assertIn("cleared", r.stdout)
        self.assertIn(t, r.stdout)
        self.assertStatus(self.c.get("/v1/types/%s" % t), 404, "not_found")

    def test_timeout_of_a_missing_type_exits_5(self):
        t = uniq("to-missing")
        for args in (("timeout", t), ("timeout", t, "--clear")):
            with self.subTest(args=args):
                r = self.assertExit(self.kvq(*args), 5)
                self.assertIn("not_found", r.stderr)
                self.assertEqual(r.stdout, "")

    def test_timeout_rejects_bad_seconds_as_usage_errors(self):
        t = uniq("to-bad")
        for args in (("0",), ("-5",), ("abc",), ("nan",), ("30", "--clear")):
            with self.subTest(args=args):
                r = self.assertExit(self.kvq("timeout", t, *args), 2)
                self.assertIn("kvq timeout:", r.stderr)
        self.assertStatus(self.c.get("/v1/types/%s" % t), 404, "not_found")

    def test_types_lists_timeout_and_retention_columns(self):
        kept, expiring = uniq("types-kept"), uniq("types-exp")
        self.ok("timeout", kept, "30")
        self.ok("timeout", expiring, "2.5")
        self.ok("retention", expiring, "1.5")
        r = self.ok("types")
        header, rows = table(r.stdout)
        self.assertEqual(header, ["TYPE", "TIMEOUT", "MAX-LOST-RUNS", "RETENTION", "MAX-ATTEMPTS",
                                  "BACKOFF", "PAUSED", "MAX-RUNNING", "RATE", "PER-GROUP"])
        by_type = {row[0]: row[1:] for row in rows}
        policy = ["25", "1s", "x2", "cap", "3600s", "jitter", "0.2", "no", "none", "none", "none"]
        self.assertEqual(by_type.get(kept), ["30s", "never", "kept"] + policy, r.stdout)
        self.assertEqual(by_type.get(expiring), ["2.5s", "never", "removed", "after", "1.5s"] + policy,
                         r.stdout)

    def test_max_lost_runs_prints_sets_and_clears_only_that_setting(self):
        t = uniq("mlr")
        self.ok("timeout", t, "30")
        self.ok("retention", t, "60")
        r = self.ok("max-lost-runs", t)
        self.assertEqual(r.stdout, "%s: no limit on lost runs in a row (each counts as an attempt)\n"
                         % t)
        r = self.ok("max-lost-runs", t, "3")
        self.assertEqual(r.stdout, "%s: jobs are given up after 3 lost runs in a row\n" % t)
        self.assertEqual(self.assertStatus(self.c.get("/v1/types/%s" % q(t)), 200),
                         dict({"type": t, "timeout": 30.0, "finished_retention": 60.0, "max_lost_runs": 3}, **SETTING_DEFAULTS))
        header, rows = table(self.ok("types").stdout)
        self.assertIn([t, "30s", "3", "removed", "after", "60s", "25", "1s", "x2", "cap", "3600s",
                       "jitter", "0.2", "no", "none", "none", "none"], rows)
        body = self.ok_json("max-lost-runs", t, "--clear")
        self.assertEqual(body, dict({"type": t, "timeout": 30.0, "finished_retention": 60.0, "max_lost_runs": None}, **SETTING_DEFAULTS))
        for bad in (["0"], ["1.5"], ["x"], ["1000001"], ["3", "--clear"]):
            r = self.assertExit(self.kvq("max-lost-runs", t, *bad), 2)
            self.assertIn("kvq max-lost-runs:", r.stderr)
        r = self.assertExit(self.kvq("max-lost-runs", uniq("absent"), "3"), 5)
        self.assertIsNone(self.c.get("/v1/types/%s" % q(t)).json["max_lost_runs"])

    def test_types_json(self):
        kept, expiring = uniq("tj-kept"), uniq("tj-exp")
        self.ok("timeout", kept, "30")
        self.ok("timeout", expiring, "10")
        self.ok("retention", expiring, "3600")
        types = self.ok_json("types")["types"]
        self.assertIn(dict({"type": kept, "timeout": 30.0, "finished_retention": None, "max_lost_runs": None}, **SETTING_DEFAULTS), types)
        self.assertIn(dict({"type": expiring, "timeout": 10.0, "finished_retention": 3600.0, "max_lost_runs": None}, **SETTING_DEFAULTS), types)
        names = [x["type"] for x in types]
        self.assertEqual(names, sorted(names))

    def test_retention_print_set_and_clear(self):
        t = self.new_type("ret")
        r = self.ok("retention", t)
        self.assertEqual(r.stdout.strip(), "%s: finished jobs kept" % t)
        r = self.ok("retention", t, "3600")
        self.assertEqual(r.stdout.strip(), "%s: finished jobs removed after 3600s" % t)
        self.assertEqual(self.assertStatus(self.c.get("/v1/types/%s" % t), 200),
                         dict({"type": t, "timeout": 30.0, "finished_retention": 3600.0, "max_lost_runs": None}, **SETTING_DEFAULTS))
        r = self.ok("retention", t)
        self.assertEqual(r.stdout.strip(), "%s: finished jobs removed after 3600s" % t)
        self.assertEqual(self.ok_json("retention", t, "1.5"),
                         dict({"type": t, "timeout": 30.0, "finished_retention": 1.5, "max_lost_runs": None}, **SETTING_DEFAULTS))
        r = self.ok("retention", t, "--clear")
        self.assertEqual(r.stdout.strip(), "%s: finished jobs kept" % t)
        self.assertEqual(self.assertStatus(self.c.get("/v1/types/%s" % t), 200),
                         dict({"type": t, "timeout": 30.0, "finished_retention": None, "max_lost_runs": None}, **SETTING_DEFAULTS))

    def test_retention_of_a_type_without_timeout_exits_5_and_creates_nothing(self):
        t = uniq("ret-none")
        for args in ((), ("10",), ("--clear",)):
            with self.subTest(args=args):
                r = self.assertExit(self.kvq("retention", t, *args), 5)
                self.assertIn("not_found", r.stderr)
                self.assertIn("timeout", r.stderr)
        self.assertStatus(self.c.get("/v1/types/%s" % t), 404, "not_found")

    def test_retention_zero_or_negative_is_a_usage_error(self):
        t = self.new_type("ret-zero")
        for bad in ("0", "-1", "soon"):
            with self.subTest(seconds=bad):
                r = self.assertExit(self.kvq("retention", t, bad), 2)
                self.assertIn("SECONDS must be a number > 0", r.stderr)
                self.assertEqual(r.stdout, "")
        r = self.assertExit(self.kvq("retention", t, "10", "--clear"), 2)
        self.assertIn("not both", r.stderr)
        self.assertIsNone(self.assertStatus(self.c.get("/v1/types/%s" % t),
                                            200)["finished_retention"])

    def test_setting_the_timeout_keeps_the_retention(self):
        t = self.new_type("ret-keep")
        self.ok("retention", t, "120")
        body = self.ok_json("timeout", t, "5")
        self.assertEqual(body, dict({"type": t, "timeout": 5.0, "finished_retention": 120.0, "max_lost_runs": None}, **SETTING_DEFAULTS))
        self.assertEqual(self.assertStatus(self.c.get("/v1/types/%s" % t), 200), body)
        r = self.ok("retention", t)
        self.assertEqual(r.stdout.strip(), "%s: finished jobs removed after 120s" % t)

    def test_finished_job_is_removed_after_its_retention_not_before(self):
        t = self.new_type("ret-expire")
        self.ok("retention", t, "1")
        self.ok("add", t, "done")
        _, lock = self.accept_one(t)
        self.ok("finish", t, "done", "--lock", lock)
        finished = time.monotonic()
        self.assertEqual(self.ok_json("get", t, "done")["state"], "finished")
        while True:
            r = self.kvq("get", t, "done")
            if r.returncode != 0 or time.monotonic() - finished > 6:
                break
            time.sleep(0.05)
        kept_for = time.monotonic() - finished
        r = self.assertExit(r, 5)
        self.assertIn("not_found", r.stderr)
        self.assertGreaterEqual(kept_for, 0.9, "removed before its retention of 1 s passed")
        self.assertLess(kept_for, 6)


class JobCommands(CliTestCase):

    def setUp(self):
        super().setUp()
        self.t = self.new_type("jobs")

    def test_add_prints_added_and_stores_the_data(self):
        r = self.ok("add", self.t, "j1", '{"k": 1, "b": "x"}')
        self.assertEqual(r.stdout.strip(), "added %s/j1" % self.t)
        job = self.assertJobState(self.t, "j1", "pending")
        self.assertEqual(job["data"], {"b": "x", "k": 1})

    def test_add_json_without_data_and_with_options(self):
        self.assertEqual(self.ok_json("add", self.t, "j2"), {"id": "j2", "added": True})
        self.assertEqual(self.assertJobState(self.t, "j2", "pending")["data"], {})
        self.ok("add", self.t, "j3", '{"p": true}', "--priority", "5", "--at", "1")
        job = self.assertJobState(self.t, "j3", "pending")
        self.assertEqual((job["priority"], job["scheduled_time"], job["data"]), (5, 1, {"p": True}))

    def test_add_reads_data_from_stdin(self):
        self.ok("add", self.t, "in", "-", input='{"from": "stdin"}')
        self.assertEqual(self.assertJobState(self.t, "in", "pending")["data"], {"from": "stdin"})

    def test_get_text(self):
        self.ok("add", self.t, "g1", '{"n": 7}', "--priority", "3")
        r = self.ok("get", self.t, "g1")
        fields = key_values(r.stdout)
        self.assertEqual(fields.get("type"), self.t, r.stdout)
        self.assertEqual(fields.get("id"), "g1", r.stdout)
        self.assertEqual(fields.get("state"), "pending", r.stdout)
        self.assertEqual(fields.get("priority"), "3", r.stdout)
        self.assertEqual(fields.get("attempts"), "0", r.stdout)
        self.assertEqual(json.loads(fields.get("data", "null")), {"n": 7}, r.stdout)

    def test_get_json_is_the_job(self):
        self.ok("add", self.t, "g2", '{"n": 8}')
        job = self.ok_json("get", self.t, "g2")
        self.assertEqual(job, self.assertStatus(self.c.job(self.t, "g2"), 200))
        self.assertEqual((job["type"], job["id"], job["state"], job["data"]),
                         (self.t, "g2", "pending", {"n": 8}))

    def test_get_of_a_missing_job_exits_5(self):
        r = self.assertExit(self.kvq("get", self.t, "nope"), 5)
        self.assertEqual(r.stdout, "")
        self.assertIn("not_found", r.stderr)
        self.assertIn("nope", r.stderr)
        # --json also prints the error body on stdout
        r = self.assertExit(self.kvq("get", self.t, "nope", "--json"), 5)
        self.assertEqual(json.loads(r.stdout)["error"], "not_found")

    def test_ids_with_spaces_slashes_and_unicode_round_trip(self):
        jid = "a b/c?d#e%f ü"
        self.ok("add", self.t, jid, '{"x": 1}')
        self.assertEqual(self.ok_json("get", self.t, jid)["id"], jid)
        self.assertEqual(self.assertStatus(self.c.job(self.t, jid), 200)["data"], {"x": 1})
        self.ok("rm", self.t, jid)
        self.assertStatus(self.c.job(self.t, jid), 404, "not_found")

    def _three_states(self):
        """One running, one finished and one pending job (accepts see one due job each)."""
        t = self.t
        self.ok("add", t, "r", '{"s": "r"}')
        self.assertEqual(self.accept_one(t)[0], "r")
        self.ok("add", t, "f", '{"s": "f"}')
        jid, lock = self.accept_one(t)
        self.assertEqual(jid, "f")
        self.ok("finish", t, "f", "--lock", lock)
        self.ok("add", t, "p", '{"s": "p"}')

    def test_ls_lists_all_jobs_in_id_order(self):
        self._three_states()
        r = self.ok("ls", self.t)
        header, rows = table(r.stdout)
        self.assertEqual(header, ["ID", "STATE", "OUTCOME", "PRIORITY", "SCHEDULED", "ATTEMPTS",
                                  "WORKER", "DATA"])
        self.assertEqual([(row[0], row[1]) for row in rows],
                         [("f", "finished"), ("p", "pending"), ("r", "running")], r.stdout)
        self.assertNotIn("more:", r.stdout)
        body = self.ok_json("ls", self.t)
        self.assertEqual([(j["id"], j["state"], j["data"]) for j in body["jobs"]],
                         [("f", "finished", {"s": "f"}), ("p", "pending", {"s": "p"}),
                          ("r", "running", {"s": "r"})])
        self.assertEqual(body["next_cursor"], "")

    def test_ls_state_filters(self):
        self._three_states()
        for state, jid in (("pending", "p"), ("running", "r"), ("finished", "f")):
            with self.subTest(state=state):
                _, rows = table(self.ok("ls", self.t, "--state", state).stdout)
                self.assertEqual([(row[0], row[1]) for row in rows], [(jid, state)])
                jobs = self.ok_json("ls", self.t, "--state", state)["jobs"]
                self.assertEqual([(j["id"], j["state"]) for j in jobs], [(jid, state)])

    def test_ls_of_an_empty_type_says_no_jobs(self):
        r = self.ok("ls", self.t)
        self.assertEqual(r.stdout.strip(), "no jobs")
        self.assertEqual(self.ok_json("ls", self.t), {"jobs": [], "next_cursor": ""})

    def test_ls_limit_prints_the_next_cursor(self):
        for jid in ("a", "b"):
            self.ok("add", self.t, jid)
        r = self.ok("ls", self.t, "--limit", "1")
        self.assertEqual([row[0] for row in table(r.stdout)[1] if row[0] != "more:"], ["a"])
        self.assertIn("more: --cursor ", r.stdout)
        cursor = r.stdout.split("more: --cursor ", 1)[1].split()[0]
        r = self.ok("ls", self.t, "--limit", "1", "--cursor", cursor)
        self.assertEqual(table(r.stdout)[1][0][0], "b", r.stdout)

    def test_values_the_server_rejects_exit_2_like_local_usage_errors(self):
        # the same kind of mistake, caught by the server (400) or by the CLI, exits 2 either way
        self.ok("add", self.t, "v1")
        for args in (("ls", self.t, "--state", "done"), ("ls", self.t, "--state", "bogus"),
                     ("ls", self.t, "--limit", "0"), ("accept", self.t, "--count", "1000"),
                     ("accept", self.t, "--timeout", "301")):
            with self.subTest(args=args):
                r = self.assertExit(self.kvq(*args), 2)
                self.assertIn("invalid_argument", r.stderr)
                self.assertEqual(r.stdout, "")
                r = self.assertExit(self.kvq(*(args + ("--json",))), 2)
                self.assertEqual(json.loads(r.stdout)["error"], "invalid_argument")
        r = self.assertExit(self.kvq("accept", self.t, "--count", "many"), 2)
        self.assertIn("--count needs an integer", r.stderr)
        self.assertJobState(self.t, "v1", "pending")

    def test_rm_removes_and_a_missing_job_exits_5(self):
        self.ok("add", self.t, "gone")
        r = self.ok("rm", self.t, "gone")
        self.assertEqual(r.stdout.strip(), "removed %s/gone" % self.t)
        self.assertStatus(self.c.job(self.t, "gone"), 404, "not_found")
        self.assertExit(self.kvq("get", self.t, "gone"), 5)
        r = self.assertExit(self.kvq("rm", self.t, "gone"), 5)
        self.assertIn("not_found", r.stderr)

    def test_add_to_a_type_without_timeout_exits_2_and_stores_nothing(self):
        t = uniq("no-timeout")
        r = self.assertExit(self.kvq("add", t, "x"), 2)
        self.assertIn("no_timeout", r.stderr)
        self.assertStatus(self.c.job(t, "x"), 404)


class WorkerFlow(CliTestCase):

    def setUp(self):
        super().setUp()
        self.t = self.new_type("work")

    def test_accept_prints_the_job_and_its_lock(self):
        self.ok("add", self.t, "w1", '{"n": 1}')
        r = self.ok("accept", self.t, "--timeout", "5")
        fields = key_values(r.stdout)
        self.assertEqual(fields.get("type"), self.t, r.stdout)
        self.assertEqual(fields.get("id"), "w1", r.stdout)
        self.assertTrue(fields.get("lock"), r.stdout)
        self.assertEqual(json.loads(fields["data"]), {"n": 1})
        job = self.assertJobState(self.t, "w1", "running")
        self.assertEqual(job["attempts"], 1)
        # the printed lock is the real one: finishing with it works
        self.ok("finish", self.t, "w1", "--lock", fields["lock"])
        self.assertJobState(self.t, "w1", "finished")

    def test_accept_json_update_finish_then_get_shows_finished(self):
        t = self.t
        self.ok("add", t, "w2", '{"n": 2}')
        body = self.ok_json("accept", t, "--timeout", "5", "--worker", "cli-w")
        self.assertEqual(len(body["jobs"]), 1, body)
        job = body["jobs"][0]
        self.assertEqual((job["type"], job["id"], job["data"]), (t, "w2", {"n": 2}))
        lock = job["lock"]
        self.assertIsInstance(lock, str)
        running = self.assertJobState(t, "w2", "running")
        self.assertEqual(running["worker"], "cli-w")

        r = self.ok("update", t, "w2", "--lock", lock, '{"progress": 50}')
        self.assertEqual(r.stdout.strip(), "updated %s/w2" % t)
        # the update's JSON is the run's progress; the job's data, its input, stays
        running = self.assertJobState(t, "w2", "running")
        self.assertEqual((running["progress"], running["data"]), ({"progress": 50}, {"n": 2}))
        self.assertEqual(self.ok_json("update", t, "w2", "--lock", lock), {"resubmitted": False})

        r = self.ok("finish", t, "w2", "--lock", lock, '{"result": "ok"}')
        self.assertEqual(r.stdout.strip(), "finished %s/w2" % t)
        r = self.ok("get", t, "w2")
        fields = key_values(r.stdout)
        self.assertEqual(fields.get("state"), "finished", r.stdout)
        self.assertEqual(fields.get("outcome"), "succeeded", r.stdout)
        # the finish's JSON is the result, kept beside the input
        self.assertEqual(json.loads(fields["result"]), {"result": "ok"})
        self.assertEqual(json.loads(fields["data"]), {"n": 2})
        # a retry of the finish with the same lock succeeds and changes nothing
        before = self.assertJobState(t, "w2", "finished")
        self.assertEqual(self.ok_json("finish", t, "w2", "--lock", lock), {})
        self.assertEqual(self.assertJobState(t, "w2", "finished"), before)

    def test_accept_and_ls_with_a_worker_type(self):
        t, wt = self.t, uniq("wt")
        self.ok("add", t, "a", '{"n": 1}')
        self.ok("add", t, "b", '{"n": 2}')
        body = self.ok_json("accept", t, "--timeout", "5", "--worker", "shared", "--worker-type", wt)
        self.assertEqual(body["jobs"][0]["id"], "a", body)
        self.assertEqual(self.assertJobState(t, "a", "running")["worker_type"], wt)
        self.ok_json("accept", t, "--timeout", "5", "--worker", "shared")  # b: no worker type
        mine = self.ok_json("ls", t, "--worker", "shared", "--worker-type", wt)["jobs"]
        self.assertEqual([j["id"] for j in mine], ["a"])
        _, rows = table(self.ok("ls", t, "--worker-type", wt).stdout)
        self.assertEqual([row[0] for row in rows], ["a"])
        self.assertEqual(self.ok_json("ls", t, "--worker-type", uniq("other"))["jobs"], [])
        r = self.assertExit(self.kvq("accept", t, "--worker-type", wt), 2)
        self.assertIn("--worker-type needs --worker", r.stderr)

    def test_worker_calls_with_a_stale_lock_exit_4_halted(self):
        t = self.t
        self.ok("add", t, "s1", '{"v": 1}')
        _, old = self.accept_one(t)
        self.ok("rm", t, "s1")
        self.ok("add", t, "s1", '{"v": 2}')
        _, new = self.accept_one(t)
        self.assertNotEqual(old, new)
        for verb in ("update", "finish"):
            with self.subTest(verb=verb):
                r = self.assertExit(self.kvq(verb, t, "s1", "--lock", old, '{"stale": true}'), 4)
                self.assertIn("halted", r.stderr)
                self.assertEqual(r.stdout, "")
        job = self.assertJobState(t, "s1", "running")
        self.assertEqual(job["data"], {"v": 2})
        self.ok("finish", t, "s1", "--lock", new)
        # once finished, its own lock is stale for update
        r = self.assertExit(self.kvq("update", t, "s1", "--lock", new), 4)
        self.assertIn("halted", r.stderr)
        self.assertJobState(t, "s1", "finished")

    def test_finish_with_a_lock_accept_never_issued_exits_2_invalid_argument(self):
        # docs/http-api.md: such a lock is 400 invalid_argument, a request the server refused
        # as wrong (exit 2), not halted (4): no job was ever held with it.
        t = self.t
        self.ok("add", t, "m1")
        _, lock = self.accept_one(t)
        for bad in ("garbage", lock + "x"):
            with self.subTest(lock=bad):
                r = self.assertExit(self.kvq("finish", t, "m1", "--lock", bad), 2)
                self.assertIn("invalid_argument", r.stderr)
                r = self.assertExit(self.kvq("finish", t, "m1", "--lock", bad, "--json"), 2)
                self.assertEqual(json.loads(r.stdout)["error"], "invalid_argument")
        self.assertJobState(t, "m1", "running")

    def test_finish_without_lock_or_with_bad_data_is_a_usage_error(self):
        t = self.t
        self.ok("add", t, "u1")
        _, lock = self.accept_one(t)
        r = self.assertExit(self.kvq("finish", t, "u1"), 2)
        self.assertIn("--lock is required", r.stderr)
        r = self.assertExit(self.kvq("finish", t, "u1", "--lock", lock, "{bad"), 2)
        self.assertIn("not valid JSON", r.stderr)
        self.assertJobState(t, "u1", "running")

    def test_accept_on_an_empty_type_exits_3_quickly(self):
        started = time.monotonic()
        r = self.assertExit(self.kvq("accept", self.t, "--timeout", "0.2", timeout=10), 3)
        elapsed = time.monotonic() - started
        self.assertEqual(r.stdout, "")
        self.assertIn("no job within 0.2s", r.stderr)
        self.assertGreaterEqual(elapsed, 0.15, "returned before its timeout")
        self.assertLess(elapsed, 3)

    def test_wait_returns_once_another_client_finishes_the_job(self):
        t = self.t
        self.ok("add", t, "wt", '{"n": 1}')
        lock = self.assertStatus(self.c.accept(t), 200)["jobs"][0]["lock"]
        env = dict(os.environ)
        env.pop("KVQ_URL", None)
        env.pop("KVQ_TOKEN", None)
        proc = subprocess.Popen([KVQ_BIN, "wait", t, "wt", "--state", "finished", "--timeout",
                                 "20", "--json", "--url", self.server.url],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env=env)
        try:
            time.sleep(0.4)
            if proc.poll() is not None:
                self.fail("wait returned before the job finished: exit %d, %r"
                          % (proc.returncode, proc.communicate()))
            self.assertStatus(self.c.post("/v1/jobs/%s/wt/finish" % q(t),
                                          {"lock": lock, "data": {"done": 1}}), 200)
            started = time.monotonic()
            out, err = proc.communicate(timeout=10)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
        self.assertEqual(proc.returncode, 0, err)
        self.assertLess(time.monotonic() - started, 5)
        event = json.loads(out)
        self.assertEqual((event["type"], event["id"], event["found"], event["state"],
                          event["data"]), (t, "wt", True, "finished", {"done": 1}))

    def test_wait_text_and_its_timeout_and_missing_job(self):
        t = self.t
        self.ok("add", t, "wp", '{"n": 2}')
        fields = key_values(self.ok("wait", t, "wp", "--state", "pending").stdout)
        self.assertEqual((fields.get("id"), fields.get("state")), ("wp", "pending"))
        r = self.assertExit(self.kvq("wait", t, "wp", "--timeout", "0.2"), 3)
        self.assertIn("not finished within 0.2s", r.stderr)
        r = self.assertExit(self.kvq("wait", t, "nope", "--timeout", "1"), 5)
        self.assertIn("not_found", r.stderr)


class RemovingATypesJobs(CliTestCase):
    """kvq types clear-jobs / rm over DELETE /v1/types/{type}/jobs (200 {"removed": N}) and
    DELETE /v1/types/{type} (409 type_has_jobs while the type has jobs)."""

    def _type_with_jobs(self, prefix):
        t = self.new_type(prefix)
        for jid in ("a", "b", "c"):
            self.ok("add", t, jid)
        jid, lock = self.accept_one(t)  # one running
        return t, jid, lock

    def test_clear_jobs_removes_every_job_keeps_the_type_and_halts_its_worker(self):
        t, jid, lock = self._type_with_jobs("clear")
        r = self.ok("types", "clear-jobs", t)
        self.assertEqual(r.stdout, "removed 3 jobs of %s\n" % t)
        self.assertEqual(self.ok_json("ls", t)["jobs"], [])
        self.assertEqual(self.assertStatus(self.c.get("/v1/types/%s" % q(t)), 200)["timeout"], 30.0)
        r = self.assertExit(self.kvq("finish", t, jid, "--lock", lock), 4)
        self.assertIn("halted", r.stderr)
        self.assertEqual(self.ok_json("types", "clear-jobs", t), {"removed": 0})

    def test_rm_refuses_a_type_with_jobs_and_with_jobs_removes_both(self):
        t, _, _ = self._type_with_jobs("rm")
        for args in (("types", "rm", t), ("timeout", t, "--clear")):
            with self.subTest(args=args):
                r = self.assertExit(self.kvq(*args), 2)
                self.assertIn("type_has_jobs", r.stderr)
                self.assertIn("kvq types rm %s --with-jobs" % t, r.stderr)
        self.assertEqual(len(self.ok_json("ls", t)["jobs"]), 3)
        r = self.ok("types", "rm", t, "--with-jobs")
        self.assertEqual(r.stdout, "removed %s and its 3 jobs\n" % t)
        self.assertStatus(self.c.get("/v1/types/%s" % q(t)), 404, "not_found")
        self.assertNotIn(t, [x["type"] for x in self.ok_json("types")["types"]])

    def test_rm_of_an_empty_type_and_of_a_missing_one(self):
        t = self.new_type("rm-empty")
        self.assertEqual(self.ok("types", "rm", t).stdout, "removed %s\n" % t)
        r = self.assertExit(self.kvq("types", "rm", t), 5)
        self.assertIn("not_found", r.stderr)
        r = self.assertExit(self.kvq("types", "rm"), 2)
        self.assertIn("missing arguments", r.stderr)


class Bench(CliTestCase):
    """kvq bench runs on a fresh type of its own and removes it and its jobs when it ends:
    done, failed midway, or interrupted."""

    def types_now(self):
        return self.assertStatus(self.c.get("/v1/types"), 200)

    def test_bench_leaves_the_types_as_it_found_them(self):
        self.new_type("bench-neighbour")
        before = self.types_now()
        r = self.assertExit(self.kvq("bench", "--jobs", "300", "--workers", "2", "--producers",
                                     "2", "--json", timeout=120), 0)
        out = json.loads(r.stdout)
        self.assertEqual(out["jobs"], 300)
        self.assertTrue(out["next"])  # by default a worker finishes and accepts in one request
        self.assertRegex(out["type"], r"^kvq-bench-[0-9a-f]{8}$")
        self.assertEqual(self.types_now(), before)
        self.assertStatus(self.c.get("/v1/types/%s" % q(out["type"])), 404, "not_found")
        jobs = self.c.get("/v1/jobs/%s" % q(out["type"]))
        if jobs.status == 200:  # a server that lists a missing type as empty
            self.assertEqual(jobs.json["jobs"], [])
        else:
            self.assertStatus(jobs, 404, "not_found")

    def test_bench_with_no_next_accepts_and_finishes_in_two_requests(self):
        before = self.types_now()
        r = self.assertExit(self.kvq("bench", "--jobs", "200", "--workers", "2", "--no-next",
                                     "--json", timeout=120), 0)
        out = json.loads(r.stdout)
        self.assertEqual((out["jobs"], out["next"]), (200, False))
        self.assertEqual(self.types_now(), before)

    def test_bench_with_batches_and_a_named_type_removes_it(self):
        t = uniq("bench-named")
        before = self.types_now()
        r = self.assertExit(self.kvq("bench", "--jobs", "200", "--batch", "10", "--type", t,
                                     timeout=120), 0)
        self.assertIn("on type %s" % t, r.stdout)
        self.assertEqual(self.types_now(), before)

    def test_bench_refuses_a_type_that_exists_and_leaves_it_alone(self):
        t = self.new_type("bench-real", timeout=45)
        self.ok("add", t, "real-work", '{"keep": true}')
        before = self.types_now()
        r = self.assertExit(self.kvq("bench", "--jobs", "10", "--type", t), 2)
        self.assertIn("exists already", r.stderr)
        self.assertEqual(self.types_now(), before)
        self.assertEqual([(j["id"], j["data"]) for j in self.ok_json("ls", t)["jobs"]],
                         [("real-work", {"keep": True})])
        self.assertEqual(self.assertStatus(self.c.get("/v1/types/%s" % q(t)), 200)["timeout"], 45.0)

    def test_bench_interrupted_removes_its_type_and_exits_130(self):
        before = self.types_now()
        env = dict(os.environ)
        env.pop("KVQ_URL", None)
        env.pop("KVQ_TOKEN", None)
        proc = subprocess.Popen([KVQ_BIN, "bench", "--jobs", "10000000", "--workers", "2",
                                 "--producers", "2", "--url", self.server.url],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        try:
            def bench_types():
                return [x["type"] for x in self.types_now()["types"]
                        if x["type"].startswith("kvq-bench-")]
            deadline = time.monotonic() + 20
            while not bench_types() and time.monotonic() < deadline:
                time.sleep(0.05)
            [t] = bench_types()
            deadline = time.monotonic() + 20
            while (len(self.c.get("/v1/jobs/%s?limit=5" % q(t)).json["jobs"]) < 5
                   and time.monotonic() < deadline):
                time.sleep(0.05)
            proc.send_signal(signal.SIGINT)
            out, err = proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
        self.assertEqual(proc.returncode, 130, err)
        self.assertIn("interrupted; removing type %s" % t, err)
        for sign in CRASH_SIGNS:
            self.assertNotIn(sign, err)
        self.assertEqual(out, "")
        self.assertEqual(self.types_now(), before)


class BenchFailingMidway(CliTestCase):
    server_kwargs = {"max_body": 1024}

    def test_a_bench_whose_adds_are_refused_removes_its_type(self):
        before = self.assertStatus(self.c.get("/v1/types"), 200)
        r = self.assertExit(self.kvq("bench", "--jobs", "50", "--payload", "4000", timeout=60), 2)
        self.assertIn("kvq bench: add: body_too_large", r.stderr)
        self.assertEqual(self.assertStatus(self.c.get("/v1/types"), 200), before)


class Top(CliTestCase):

    def test_top_once_shows_the_counts_of_every_state(self):
        t = self.new_type("top")
        self.ok("add", t, "a")
        jid, lock = self.accept_one(t)
        self.ok("finish", t, jid, "--lock", lock)
        self.ok("add", t, "b")
        self.accept_one(t)
        self.ok("add", t, "c")
        self.ok("add", t, "d")
        r = self.ok("top", "--once")
        header, rows = table(r.stdout)
        self.assertEqual(header, ["TYPE", "TIMEOUT", "PENDING", "RUNNING", "FINISHED",
                                  "ACCEPTS/S", "FINISHES/S"])
        row = [row for row in rows if row[0] == t]
        self.assertEqual(len(row), 1, r.stdout)
        self.assertEqual(row[0][1:5], ["30s", "2", "1", "1"], r.stdout)

    def test_top_once_json(self):
        t = self.new_type("topj")
        self.ok("add", t, "a")
        self.accept_one(t)
        self.ok("add", t, "b")
        types = self.ok_json("top", "--once")["types"]
        mine = [x for x in types if x["type"] == t]
        self.assertEqual(mine, [{"type": t, "timeout": 30.0, "pending": 1, "running": 1,
                                 "finished": 0}])


class UsageAndNetworkErrors(CliTestCase):

    def test_unknown_command_exits_2(self):
        r = self.assertExit(self.kvq("frobnicate"), 2)
        self.assertIn("unknown command 'frobnicate'", r.stderr)
        self.assertEqual(r.stdout, "")
        r = self.assertExit(run_kvq(), 2)
        self.assertIn("usage: kvq", r.stderr)

    def test_help_exits_0(self):
        r = self.assertExit(run_kvq("help"), 0)
        self.assertIn("retention TYPE", r.stdout)
        r = self.assertExit(run_kvq("add", "--help"), 0)
        self.assertIn("usage: kvq add TYPE ID", r.stdout)

    def test_help_gives_every_command_a_line_of_its_own(self):
        # Each command's synopsis begins a line at column 2 and its summary stands at column
        # 34, on the synopsis's line or, for a long synopsis, on the next; nothing else runs on.
        commands = ("serve", "backup", "demo", "add", "get", "ls", "rm", "cancel", "rerun",
                    "wait", "watch", "accept", "update", "finish", "fail", "snooze", "resubmit",
                    "types", "timeout", "retention", "max-lost-runs", "pause", "resume",
                    "groups", "schedule", "batch", "deps", "workers", "top", "bench", "version",
                    "help")
        out = self.assertExit(run_kvq("help"), 0).stdout
        lines = out.splitlines()
        self.assertEqual(lines[0], "usage: kvq <command> [options]")
        block = lines[1:lines.index("client options (every command but serve, backup and demo "
                                    "talks to a server):")]
        listed = set()
        summary_due = False
        for line in block:
            with self.subTest(line=line):
                self.assertLessEqual(len(line), 80)
                if not line or line.endswith(":") and not line.startswith(" "):
                    self.assertFalse(summary_due, "a synopsis without its summary")
                    continue  # between sections, and a section's title
                if line.startswith(" " * 34):  # a summary's own line, or a summary going on
                    self.assertNotEqual(line[34], " ")
                    summary_due = False
                    continue
                self.assertFalse(summary_due, "a synopsis without its summary")
                self.assertRegex(line, r"^  [a-z]")
                name = line.split()[0]
                self.assertIn(name, commands)
                listed.add(name)
                if len(line) > 34 and line[32:34] == "  " and line[34] != " ":
                    self.assertNotIn("  ", line[2:32].rstrip(), "one synopsis")
                else:  # a synopsis that reaches the column, alone on its line
                    self.assertNotIn("  ", line[2:], "one synopsis")
                    summary_due = True
        self.assertFalse(summary_due)
        self.assertEqual(listed, set(commands))
        for name in commands:
            if name in ("version", "help"):
                continue
            with self.subTest(command=name):
                r = self.assertExit(run_kvq(name, "--help"), 0)
                self.assertIn("usage: kvq %s" % name, r.stdout)

    def test_help_states_the_exit_codes_of_server_answers(self):
        for args in (("help",), ("ls", "--help"), ("types", "--help")):
            with self.subTest(args=args):
                r = self.assertExit(run_kvq(*args), 0)
                self.assertIn("2  usage error: a bad command line, or a request the server "
                              "refused as wrong", r.stdout)
                self.assertIn("5  not found (HTTP 404 not_found)", r.stdout)
                self.assertIn("4  halted (HTTP 409 halted)", r.stdout)

    def test_missing_positional_exits_2(self):
        t = self.new_type("usage")
        for args in (("add", t), ("get", t), ("get",), ("rm", t), ("accept",), ("timeout",),
                     ("retention",), ("wait", t), ("finish", t, "--lock", "L")):
            with self.subTest(args=args):
                r = self.assertExit(self.kvq(*args), 2)
                self.assertIn("missing arguments", r.stderr)
                self.assertIn("usage: kvq %s" % args[0], r.stderr)
                self.assertEqual(r.stdout, "")

    def test_unknown_option_and_bad_option_value_exit_2(self):
        t = self.new_type("usage-opt")
        r = self.assertExit(self.kvq("ls", t, "--bogus"), 2)
        self.assertIn("unknown option '--bogus'", r.stderr)
        r = self.assertExit(self.kvq("add", t, "x", "--priority", "high"), 2)
        self.assertIn("--priority needs an integer", r.stderr)
        r = self.assertExit(self.kvq("accept", t, "--timeout", "-1"), 2)
        self.assertIn("--timeout needs a number of seconds", r.stderr)
        self.assertStatus(self.c.job(t, "x"), 404, "not_found")

    def test_add_with_bad_json_data_says_so_and_stores_nothing(self):
        t = self.new_type("badjson")
        for bad in ('{"k":', "not json", "{'k': 1}"):
            with self.subTest(data=bad):
                r = self.assertExit(self.kvq("add", t, "bad", bad), 2)
                self.assertIn("DATA_JSON is not valid JSON", r.stderr)
                self.assertEqual(r.stdout, "")
        # valid JSON that is not an object: the server refuses it (400, exit 2 as well)
        for bad in ("[1, 2]", '"str"', "7"):
            with self.subTest(data=bad):
                r = self.assertExit(self.kvq("add", t, "bad", bad), 2)
                self.assertIn("invalid_argument", r.stderr)
        self.assertStatus(self.c.job(t, "bad"), 404, "not_found")
        self.assertEqual(self.ok_json("ls", t)["jobs"], [])

    def test_nothing_listening_exits_1_with_a_message(self):
        for args in (("types",), ("get", "t", "x"), ("add", "t", "x", "{}"), ("top", "--once"),
                     ("types", "--json")):
            with self.subTest(args=args):
                r = self.assertExit(run_kvq(*args, url="http://127.0.0.1:1", timeout=15), 1)
                self.assertIn("127.0.0.1:1", r.stderr)
                self.assertRegex(r.stderr, r"cannot connect|connection refused")
                self.assertEqual(r.stdout, "")

    def test_a_url_that_is_not_http_is_a_usage_error(self):
        r = self.assertExit(run_kvq("types", url="notaurl"), 2)
        self.assertIn("only http:// and https:// URLs are supported", r.stderr)


class Token(CliTestCase):
    server_kwargs = {"token": "s3cret"}

    def test_without_or_with_a_wrong_token_is_unauthorized_and_names_the_token_options(self):
        # 401: the request was wrong (exit 2), and the message says where the token comes from
        t = uniq("tok")
        for token in (None, "s3cre"):
            with self.subTest(token=token):
                for args in (("types",), ("timeout", t, "5"), ("add", t, "x"), ("top", "--once")):
                    r = self.assertExit(self.kvq(*args, token=token), 2)
                    self.assertIn("unauthorized", r.stderr)
                    self.assertIn("--token", r.stderr)
                    self.assertIn("$KVQ_TOKEN", r.stderr)
                    self.assertNotIn("s3cre", r.stderr)
        r = self.assertExit(self.kvq("types"), 2)
        self.assertIn("this server needs a token", r.stderr)
        r = self.assertExit(self.kvq("types", token="wrong"), 2)
        self.assertIn("refused the token", r.stderr)
        r = self.assertExit(self.kvq("types", "--json"), 2)
        self.assertEqual(json.loads(r.stdout)["error"], "unauthorized")
        self.assertStatus(self.c.get("/v1/types/%s" % t), 404, "not_found")

    def test_with_the_token_commands_succeed(self):
        t = uniq("tok")
        r = self.ok("timeout", t, "5", token="s3cret")
        self.assertEqual(r.stdout.strip(), "%s: timeout 5s" % t)
        self.ok("add", t, "x", '{"a": 1}', token="s3cret")
        self.assertEqual(self.ok_json("get", t, "x", token="s3cret")["data"], {"a": 1})
        self.assertIn(t, [x["type"] for x in self.ok_json("types", token="s3cret")["types"]])
        self.assertIn(t, [x["type"] for x in self.ok_json("top", "--once",
                                                          token="s3cret")["types"]])

    def test_token_from_the_environment(self):
        t = uniq("tok-env")
        self.c.set_timeout(t, 5)
        env = dict(os.environ, KVQ_TOKEN="s3cret")
        env.pop("KVQ_URL", None)
        r = subprocess.run([KVQ_BIN, "timeout", t, "--url", self.server.url],
                           capture_output=True, text=True, timeout=20, env=env)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.strip(), "%s: timeout 5s" % t)


if __name__ == "__main__":
    unittest.main()
