"""Debounce and unique windows on adds over HTTP and the CLI (issue 43): an add's `debounce`
({"delay", "max_delay"}) replaces a pending job's data and pushes it out, never past the
first add + max_delay, and answers `debounced` and `scheduled_time`; on a running job it asks
for a new run; `unique_for` keeps the job as it is (`kept`, `unique_until`) in any state until
the window ends; bad input is a 400 naming the field; `kvq add --debounce DELAY[:MAX]
--unique-for S`. Every answer is checked against docs/openapi.yaml by the client."""

import json
import time
import unittest

from kvq_server import ServerTestCase, q, uniq
from test_cli import key_values, run_kvq


class AddWindowsTest(ServerTestCase):
    def new_type(self):
        t = uniq("win")
        self.c.set_timeout(t, 60)
        return t

    def test_debounce_replaces_the_data_and_pushes_the_time_within_max_delay(self):
        t = self.new_type()
        before = int(time.time() * 1000)
        first = self.assertStatus(self.c.add(t, "j", {"v": 1}, debounce={"delay": 30, "max_delay": 30.05}), 200)
        self.assertEqual(first["added"], True)
        self.assertEqual(first["debounced"], False)
        self.assertGreaterEqual(first["scheduled_time"], before + 30000)
        job = self.assertJobState(t, "j", "pending")
        self.assertEqual(job["scheduled_time"], first["scheduled_time"])
        since = job["debounce_since"]
        self.assertEqual(since, first["scheduled_time"] - 30000)
        time.sleep(0.1)  # past max_delay - delay: the bound binds
        second = self.assertStatus(self.c.add(t, "j", {"v": 2}, debounce={"delay": 30, "max_delay": 30.05}), 200)
        self.assertEqual(second["debounced"], True)
        self.assertEqual(second["scheduled_time"], since + 30050)
        job = self.assertJobState(t, "j", "pending")
        self.assertEqual(job["data"], {"v": 2})
        self.assertEqual(job["scheduled_time"], since + 30050)
        # A plain add answers as ever.
        self.assertEqual(self.assertStatus(self.c.add(t, "p"), 200), {"id": "p", "added": True})

    def test_debounce_on_a_running_job_asks_for_a_new_run(self):
        t = self.new_type()
        self.assertStatus(self.c.add(t, "j", {"v": 1}), 200)
        run = self.assertStatus(self.c.accept(t), 200)["jobs"][0]
        r = self.assertStatus(self.c.add(t, "j", {"v": 2}, debounce={"delay": 20}), 200)
        self.assertEqual(r["debounced"], False)
        job = self.assertJobState(t, "j", "running")
        self.assertTrue(job["resubmitted"])
        self.assertEqual(job["data"], {"v": 1})
        self.assertStatus(self.c.post("/v1/jobs/%s/j/finish" % q(t), {"lock": run["lock"]}), 200)
        job = self.assertJobState(t, "j", "pending")
        self.assertEqual(job["scheduled_time"], r["scheduled_time"])

    def test_a_debounced_job_runs_once_after_the_adds_go_quiet(self):
        t = self.new_type()
        for v in range(5):
            self.assertStatus(self.c.add(t, "j", {"v": v}, debounce={"delay": 0.3, "max_delay": 10}), 200)
        self.assertEqual(self.c.accept(t).status, 204)
        r = self.c.accept(t, timeout=5)
        job = self.assertStatus(r, 200)["jobs"][0]
        self.assertEqual(job["data"], {"v": 4})
        self.assertStatus(self.c.post("/v1/jobs/%s/j/finish" % q(t), {"lock": job["lock"]}), 200)
        self.assertEqual(self.c.accept(t, timeout=0.3).status, 204)

    def test_unique_for_keeps_the_job_in_any_state_until_the_window_ends(self):
        t = self.new_type()
        first = self.assertStatus(self.c.add(t, "j", {"v": 1}, unique_for=60), 200)
        self.assertEqual(first["added"], True)
        self.assertEqual(first["kept"], False)
        until = first["unique_until"]
        for fields in ({}, {"unique_for": 5}, {"debounce": {"delay": 1}}):
            r = self.assertStatus(self.c.add(t, "j", {"v": 2}, **fields), 200)
            self.assertEqual(r, {"id": "j", "added": False, "kept": True, "unique_until": until})
        run = self.assertStatus(self.c.accept(t), 200)["jobs"][0]
        self.assertEqual(self.assertStatus(self.c.add(t, "j", {"v": 3}), 200)["kept"], True)
        self.assertFalse(self.assertJobState(t, "j", "running")["resubmitted"])
        self.assertStatus(self.c.post("/v1/jobs/%s/j/finish" % q(t), {"lock": run["lock"]}), 200)
        self.assertEqual(self.assertStatus(self.c.add(t, "j", {"v": 4}), 200)["kept"], True)
        job = self.assertJobState(t, "j", "finished")
        self.assertEqual(job["data"], {"v": 1})
        self.assertEqual(job["unique_until"], until)
        # After the window (here a short one) an add behaves as without it.
        short = self.assertStatus(self.c.add(t, "s", unique_for=0.05), 200)
        while int(time.time() * 1000) <= short["unique_until"]:
            time.sleep(0.01)
        self.assertEqual(self.assertStatus(self.c.add(t, "s", {"v": 9}), 200),
                         {"id": "s", "added": True})
        self.assertEqual(self.assertJobState(t, "s", "pending")["data"], {"v": 9})
        # A batch lists what the window kept.
        r = self.assertStatus(self.c.post("/v1/jobs/%s/batch" % q(t), {"jobs": [{"id": "j"}, {"id": "n"}]}), 200)
        self.assertEqual(r, {"added": 1, "kept": ["j"]})

    def test_bad_windows_are_400s_naming_the_field(self):
        t = self.new_type()
        cases = [
            ({"debounce": 5}, "debounce"),
            ({"debounce": {}}, "delay"),
            ({"debounce": {"delay": -1}}, "debounce.delay"),
            ({"debounce": {"delay": "5"}}, "debounce.delay"),
            ({"debounce": {"delay": 10, "max_delay": 5}}, "debounce.max_delay"),
            ({"debounce": {"delay": 1, "max_delay": 1e9}}, "debounce.max_delay"),
            ({"debounce": {"delay": 1, "wait": 2}}, "wait"),
            ({"debounce": {"delay": 1}, "scheduled_time": 5}, "scheduled_time"),
            ({"debounce": {"delay": 1}, "if_exists": "keep"}, "keep"),
            ({"unique_for": 0}, "unique_for"),
            ({"unique_for": 4e7}, "unique_for"),
            ({"unique_for": True}, "unique_for"),
        ]
        for fields, named in cases:
            r = self.c.add(t, "x", **fields)
            self.assertStatus(r, 400, "invalid_argument")
            self.assertIn(named, r.json["message"], fields)
        self.assertStatus(self.c.job(t, "x"), 404)
        r = self.c.post("/v1/jobs/%s/batch" % q(t), {"jobs": [{"id": "y", "unique_for": -1}]})
        self.assertStatus(r, 400, "invalid_argument")
        self.assertIn("unique_for", r.json["message"])


class AddWindowsCliTest(ServerTestCase):
    def kvq(self, *args):
        return run_kvq(*args, url=self.server.url)

    def test_add_debounce_and_unique_for(self):
        t = uniq("wincli")
        self.c.set_timeout(t, 60)
        added = self.kvq("add", t, "j", '{"v": 1}', "--debounce", "30:60")
        self.assertEqual(added.returncode, 0, added.stderr)
        self.assertEqual(added.stdout.strip(), "added %s/j" % t)
        again = self.kvq("add", t, "j", '{"v": 2}', "--debounce", "30:60")
        self.assertEqual(again.returncode, 0, again.stderr)
        self.assertTrue(again.stdout.startswith("debounced %s/j (due 20" % t), again.stdout)
        shown = key_values(self.kvq("get", t, "j").stdout)
        self.assertIn("debounce_since", shown)
        self.assertEqual(shown["data"], '{"v":2}')
        job = self.assertJobState(t, "j", "pending")
        self.assertLessEqual(job["scheduled_time"], job["debounce_since"] + 60000)
        unique = self.kvq("add", t, "u", "--unique-for", "60")
        self.assertEqual(unique.returncode, 0, unique.stderr)
        kept = self.kvq("add", t, "u", '{"v": 2}')
        self.assertEqual(kept.returncode, 0, kept.stderr)
        self.assertTrue(kept.stdout.startswith("kept %s/u (its unique window is open until" % t),
                        kept.stdout)
        as_json = self.kvq("add", t, "u", "--unique-for", "60", "--json")
        self.assertEqual(json.loads(as_json.stdout)["kept"], True)
        for args, named in ((["--debounce", "soon"], "--debounce"),
                            (["--debounce", "5:x"], "--debounce"),
                            (["--unique-for=-1"], "--unique-for")):
            bad = self.kvq("add", t, "b", *args)
            self.assertNotEqual(bad.returncode, 0)
            self.assertIn(named, bad.stderr)
        refused = self.kvq("add", t, "b", "--debounce", "10:5")
        self.assertNotEqual(refused.returncode, 0)
        self.assertIn("max_delay", refused.stderr)


if __name__ == "__main__":
    unittest.main()
