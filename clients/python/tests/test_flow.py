# SPDX-License-Identifier: Apache-2.0
"""kvq.Client against a real kvq serve: schedules, pause / resume, the flow-control settings of
a type, and groups.

The Groups tests need a server with groups (the group field of add, max_running_per_group, GET
/v1/types/{type}/groups); against one without, they fail: they are not skipped."""

import time
import unittest

from support import ServerTest, kvq, uniq, wait_until


class TypeSettings(ServerTest):

    def test_max_running_and_rate_are_set_read_and_cleared(self):
        t = self.new_type()
        got = self.client.put_type(t, max_running=3, rate={"limit": 10, "period_ms": 1000})
        self.assertEqual((got["max_running"], got["rate"]), (3, {"limit": 10, "period_ms": 1000}))
        self.assertEqual((got["paused"], got["paused_until"]), (False, None))
        again = self.client.get_type(t)
        self.assertEqual((again["max_running"], again["rate"]), (3, {"limit": 10, "period_ms": 1000}))
        self.client.put_type(t, max_attempts=4)  # omitted: left as they are
        self.assertEqual(self.client.get_type(t)["max_running"], 3)
        cleared = self.client.put_type(t, max_running=None, rate=None)
        self.assertEqual((cleared["max_running"], cleared["rate"]), (None, None))

    def test_bad_flow_settings_are_invalid_argument(self):
        t = self.new_type()
        with self.assertRaises(kvq.InvalidArgument) as cm:
            self.client.put_type(t, max_running=0)
        self.assertIn("max_running", cm.exception.message)
        with self.assertRaises(kvq.InvalidArgument) as cm:
            self.client.put_type(t, rate={"limit": 5000, "period_ms": 1000})
        self.assertIn("limit", cm.exception.message)

    def test_max_running_caps_accepts(self):
        t = self.new_type(max_running=1)
        self.client.add_many(t, [("a", {}), ("b", {})])
        [first] = self.client.accept(t, count=5)
        self.assertEqual(self.client.accept(t, count=5), [])
        self.client.finish(t, first["id"], first["lock"])
        self.assertEqual(len(self.client.accept(t, count=5)), 1)


class PauseResume(ServerTest):

    def test_a_paused_type_hands_out_nothing_until_resumed(self):
        t = self.new_type()
        self.client.add(t, "j")
        paused = self.client.pause_type(t)
        self.assertEqual((paused["paused"], paused["paused_until"]), (True, None))
        self.assertTrue(self.client.get_type(t)["paused"])
        self.assertEqual(self.client.accept(t, timeout=0.2), [])
        resumed = self.client.resume_type(t)
        self.assertFalse(resumed["paused"])
        self.assertEqual([j["id"] for j in self.client.accept(t)], ["j"])

    def test_a_pause_for_a_while_ends_by_itself(self):
        t = self.new_type()
        before = int(time.time() * 1000)
        paused = self.client.pause_type(t, for_ms=300)
        self.assertTrue(paused["paused"])
        self.assertGreaterEqual(paused["paused_until"], before + 300 - 1000)  # server's clock
        self.client.add(t, "j")
        self.assertEqual([j["id"] for j in self.client.accept(t, timeout=5)], ["j"])

    def test_pause_of_a_missing_type_is_not_found(self):
        with self.assertRaises(kvq.NotFound):
            self.client.pause_type(uniq("missing"))
        with self.assertRaises(kvq.NotFound):
            self.client.resume_type(uniq("missing"))
        with self.assertRaises(kvq.InvalidArgument):
            self.client.pause_type(self.new_type(), for_ms=0)


class Schedules(ServerTest):

    def test_put_get_list_and_remove_a_schedule(self):
        t = self.new_type()
        name = uniq("sch")
        got = self.client.put_schedule(name, t, "0 3 * * *", timezone="Europe/Paris",
                                       data={"kind": "daily"}, priority=2, catch_up="none")
        self.assertEqual((got["name"], got["type"], got["cron"], got["timezone"], got["data"],
                          got["priority"], got["catch_up"]),
                         (name, t, "0 3 * * *", "Europe/Paris", {"kind": "daily"}, 2, "none"))
        self.assertEqual(len(got["next_runs"]), 5)
        self.assertGreater(got["next_run"], int(time.time() * 1000))
        self.assertEqual((got["enqueued"], got["skipped"], got["last_run"]), (0, 0, None))
        again = self.client.get_schedule(name)
        self.assertEqual(again["next_runs"], got["next_runs"])
        listed = [s for s in self.client.schedules() if s["name"] == name]
        self.assertEqual(len(listed), 1)
        self.assertNotIn("next_runs", listed[0])
        # replaced: defaults come back for what is not given
        replaced = self.client.put_schedule(name, t, "@hourly")
        self.assertEqual((replaced["cron"], replaced["timezone"], replaced["catch_up"]),
                         ("@hourly", "UTC", "one"))
        self.client.remove_schedule(name)
        with self.assertRaises(kvq.NotFound):
            self.client.get_schedule(name)
        with self.assertRaises(kvq.NotFound):
            self.client.remove_schedule(name)

    def test_a_schedule_enqueues_its_jobs(self):
        t = self.new_type()
        name = uniq("every")
        self.client.put_schedule(name, t, "* * * * * *", data={"n": 1})  # every second
        try:
            jobs = wait_until(lambda: self.client.list(t).jobs, 10, message="an enqueued job")
            self.assertTrue(jobs[0]["id"].startswith(name + "@"))
            self.assertEqual(jobs[0]["data"], {"n": 1})
            self.assertGreaterEqual(self.client.get_schedule(name)["enqueued"], 1)
        finally:
            self.client.remove_schedule(name)

    def test_bad_schedules_are_refused(self):
        t = self.new_type()
        with self.assertRaises(kvq.InvalidArgument):
            self.client.put_schedule(uniq("bad"), t, "not a cron")
        with self.assertRaises(kvq.InvalidArgument):
            self.client.put_schedule(uniq("bad"), t, "@daily", timezone="Mars/Olympus")
        with self.assertRaises(kvq.NotFound):
            self.client.put_schedule(uniq("bad"), uniq("missing"), "@daily")


class Groups(ServerTest):
    """Needs a server with groups."""

    def test_add_with_a_group_and_read_it_back(self):
        t = self.new_type()
        self.assertTrue(self.client.add(t, "a", {"n": 1}, group="tenant-42"))
        self.client.add(t, "none")
        answer = self.client.add_many(t, [{"id": "b", "group": "tenant-7"}, ("c", {})])
        self.assertEqual(answer["added"], 2)
        self.assertEqual(self.client.get(t, "a")["group"], "tenant-42")
        self.assertEqual(self.client.get(t, "b")["group"], "tenant-7")
        self.assertIsNone(self.client.get(t, "none").get("group"))

    def test_max_running_per_group_and_the_groups_listing(self):
        t = self.new_type(max_running_per_group=1)
        self.assertEqual(self.client.get_type(t)["max_running_per_group"], 1)
        self.client.add_many(t, [{"id": "a0", "group": "A"}, {"id": "a1", "group": "A"},
                                 {"id": "b0", "group": "B"}])
        taken = self.client.accept(t, count=10)
        self.assertEqual(sorted(j["id"] for j in taken), ["a0", "b0"])
        self.assertEqual(self.client.accept(t), [])
        groups = self.client.groups(t)
        self.assertEqual([(g["group"], g["running"], g["pending"], g["full"]) for g in groups],
                         [("A", 1, 1, True), ("B", 1, 0, True)])
        self.assertEqual([g["group"] for g in self.client.groups(t, after="A")], ["B"])
        self.assertEqual([g["group"] for g in self.client.iter_groups(t, page_size=1)],
                         ["A", "B"])
        a0 = [j for j in taken if j["id"] == "a0"][0]
        self.client.finish(t, "a0", a0["lock"])
        self.assertEqual([j["id"] for j in self.client.accept(t)], ["a1"])
        self.assertIsNone(self.client.put_type(t, max_running_per_group=None)["max_running_per_group"])

    def test_groups_take_turns(self):
        t = self.new_type()
        self.client.add_many(t, [{"id": "a%d" % i, "group": "A"} for i in range(3)] +
                             [{"id": "b0", "group": "B"}])
        # two accepts' worth: one of each group, not two of the group with more jobs
        taken = [j["id"] for j in self.client.accept(t, count=2)]
        self.assertEqual(sorted(taken), ["a0", "b0"])

    def test_a_bad_group_is_invalid_argument(self):
        t = self.new_type()
        with self.assertRaises(kvq.InvalidArgument):
            self.client.add(t, "j", group="x" * 129)
        with self.assertRaises(kvq.NotFound):
            self.client.groups(uniq("missing"))


if __name__ == "__main__":
    unittest.main()
