"""Cron schedules over HTTP and the CLI, with three `kvq serve` processes on one LMDB data
directory, every one running the scheduler: a per-second schedule's occurrences are each
enqueued once (consecutive seconds, none twice, the schedule's count equal to the jobs) over
more than eight seconds; killing one server (kill -9) does not stop them; GET shows the next
five times; validation errors are 400 with a body naming the problem, an unknown type 404."""

import calendar
import json
import time
import unittest

import three_servers
from kvq_server import q, uniq, wait_until
from test_cli import run_kvq


def occurrence_seconds(name, ids):
    """The UTC seconds since the epoch of each job id NAME@YYYY-MM-DDTHH:MM:SSZ, sorted."""
    out = []
    for jid in ids:
        prefix, _, stamp = jid.rpartition("@")
        assert prefix == name, jid
        out.append(calendar.timegm(time.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ")))
    return sorted(out)


class SchedulesOnThreeServers(unittest.TestCase):

    def setUp(self):
        self.servers = three_servers.on_one_directory(self)
        self.clients = [s.client() for s in self.servers]

    def ok(self, r, status=200):
        self.assertEqual(r.status, status, r)
        return r.json

    def new_type(self):
        t = uniq("sched")
        self.assertEqual(self.clients[0].set_timeout(t, 30).status, 200)
        return t

    def job_ids(self, t, client=None):
        body = self.ok((client or self.clients[0]).get("/v1/jobs/%s?limit=1000" % q(t)))
        return [j["id"] for j in body["jobs"]]

    def assertConsecutive(self, name, ids):
        seconds = occurrence_seconds(name, ids)
        self.assertEqual(len(seconds), len(set(seconds)), ids)
        self.assertEqual(seconds, list(range(seconds[0], seconds[0] + len(seconds))),
                         "occurrences missing: %r" % ids)

    def test_every_second_enqueued_once_by_three_servers(self):
        t, name = self.new_type(), uniq("every-second")
        # catch_up all: on a loaded machine a scheduler may run late, and then every occurrence
        # it finds still comes, so that a gap can only mean an occurrence was lost.
        body = self.ok(self.clients[1].put("/v1/schedules/%s" % q(name),
                                           {"type": t, "cron": "* * * * * *", "catch_up": "all",
                                            "data": {"from": "cron"}, "priority": 3}))
        self.assertEqual((body["type"], body["cron"], body["timezone"], body["catch_up"]),
                         (t, "* * * * * *", "UTC", "all"))
        self.assertEqual((body["enqueued"], body["skipped"], body["last_run"]), (0, 0, None))
        runs = body["next_runs"]
        self.assertEqual(len(runs), 5)
        self.assertEqual([b - a for a, b in zip(runs, runs[1:])], [1000] * 4)
        self.assertEqual(runs[0] % 1000, 0)

        start = time.monotonic()
        wait_until(lambda: len(self.job_ids(t)) >= 9, 40, interval=0.2,
                   message="nine occurrences")
        self.assertGreaterEqual(time.monotonic() - start, 7.0)
        ids = self.job_ids(t)
        self.assertConsecutive(name, ids)
        # Every server reads the same schedule; its count matches the jobs (read after them,
        # so it may have gone on by an occurrence or two).
        for c in self.clients:
            s = self.ok(c.get("/v1/schedules/%s" % q(name)))
            self.assertGreaterEqual(s["enqueued"], len(ids), s)
            self.assertEqual(s["skipped"], 0, s)
        self.ok(self.clients[0].delete("/v1/schedules/%s" % q(name)))
        final = self.job_ids(t)
        s_count = len(final)
        self.assertConsecutive(name, final)
        job = self.ok(self.clients[2].job(t, final[0]))
        self.assertEqual((job["data"], job["priority"]), ({"from": "cron"}, 3))
        self.assertEqual(job["scheduled_time"], occurrence_seconds(name, [final[0]])[0] * 1000)
        # Deleted, it enqueues no more; its jobs stay.
        self.assertEqual(self.clients[1].get("/v1/schedules/%s" % q(name)).status, 404)
        time.sleep(1.5)  # a second and a half in which a live schedule would have enqueued one
        self.assertEqual(len(self.job_ids(t)), s_count)

    def test_killing_a_server_does_not_stop_the_occurrences(self):
        t, name = self.new_type(), uniq("survives")
        self.ok(self.clients[0].put("/v1/schedules/%s" % q(name),
                                    {"type": t, "cron": "* * * * * *", "catch_up": "all"}))
        wait_until(lambda: len(self.job_ids(t)) >= 2, 30, interval=0.2, message="two occurrences")
        self.servers[0].kill()
        killed_at = len(self.job_ids(t, self.clients[1]))
        wait_until(lambda: len(self.job_ids(t, self.clients[1])) >= killed_at + 4, 40,
                   interval=0.2, message="four more occurrences after the kill")
        self.servers[1].kill()
        one_left = len(self.job_ids(t, self.clients[2]))
        wait_until(lambda: len(self.job_ids(t, self.clients[2])) >= one_left + 2, 40,
                   interval=0.2, message="two more occurrences with one server left")
        self.assertConsecutive(name, self.job_ids(t, self.clients[2]))

    def test_get_list_and_next_runs_in_a_timezone(self):
        c = self.clients[0]
        t, name = self.new_type(), uniq("nightly")
        self.ok(c.put("/v1/schedules/%s" % q(name),
                      {"type": t, "cron": "30 2 * * *", "timezone": "Asia/Tokyo"}))
        s = self.ok(self.clients[2].get("/v1/schedules/%s" % q(name)))
        self.assertEqual((s["name"], s["timezone"], s["catch_up"], s["data"], s["priority"]),
                         (name, "Asia/Tokyo", "one", {}, 0))
        # 02:30 in Tokyo (UTC+9, no daylight saving) is 17:30 UTC, every day.
        for at in s["next_runs"]:
            self.assertEqual(time.gmtime(at // 1000)[3:6], (17, 30, 0), at)
        self.assertEqual([b - a for a, b in zip(s["next_runs"], s["next_runs"][1:])],
                         [86400000] * 4)
        self.assertEqual(s["next_run"], s["next_runs"][0])
        self.assertGreater(s["next_run"], int(time.time() * 1000))
        names = [x["name"] for x in self.ok(self.clients[1].get("/v1/schedules"))["schedules"]]
        self.assertIn(name, names)
        self.assertEqual(names, sorted(names))
        # Replaced, it keeps its name and takes the new cron.
        s = self.ok(c.put("/v1/schedules/%s" % q(name), {"type": t, "cron": "@hourly"}))
        self.assertEqual((s["cron"], s["timezone"]), ("@hourly", "UTC"))
        self.assertEqual([b - a for a, b in zip(s["next_runs"], s["next_runs"][1:])],
                         [3600000] * 4)
        self.ok(c.delete("/v1/schedules/%s" % q(name)))
        r = c.delete("/v1/schedules/%s" % q(name))
        self.assertEqual((r.status, r.json["error"]), (404, "not_found"), r)

    def test_validation_names_the_problem(self):
        c = self.clients[0]
        t = self.new_type()
        path = "/v1/schedules/%s" % q(uniq("bad"))
        for body, error, words in (
                ({"type": t, "cron": "61 * * * *"}, "invalid_argument", ("cron",)),
                ({"type": t, "cron": "* * *"}, "invalid_argument", ("cron",)),
                ({"type": t, "cron": "0 0 30 2 *"}, "invalid_argument", ("cron",)),
                ({"type": t, "cron": "@daily", "timezone": "Mars/Olympus"}, "invalid_argument",
                 ("Mars/Olympus",)),
                ({"cron": "@daily"}, "invalid_argument", ("type",)),
                ({"type": t}, "invalid_argument", ("cron",)),
                ({"type": t, "cron": "@daily", "catch_up": "some"}, "invalid_argument",
                 ("catch_up",)),
                ({"type": t, "cron": "@daily", "data": [1]}, "invalid_argument", ("data",)),
                ({"type": t, "cron": "@daily", "priority": 1.5}, "invalid_argument",
                 ("priority",)),
                ({"type": t, "cron": "@daily", "every": 5}, "unknown_field", ("every",))):
            with self.subTest(body=body):
                r = c.put(path, body)
                self.assertEqual((r.status, r.json["error"]), (400, error), r)
                for word in words:
                    self.assertIn(word, r.json["message"])
        r = c.put(path, {"type": uniq("no-such-type"), "cron": "@daily"})
        self.assertEqual((r.status, r.json["error"]), (404, "not_found"), r)
        r = c.put("/v1/schedules/%s" % q("bad name!"), {"type": t, "cron": "@daily"})
        self.assertEqual((r.status, r.json["error"]), (400, "invalid_argument"), r)
        self.assertEqual(c.get(path).status, 404)

    def test_a_paused_schedule_enqueues_nothing_on_any_server_until_resumed(self):
        t, name = self.new_type(), uniq("paused")
        path = "/v1/schedules/%s" % q(name)
        self.ok(self.clients[1].put(path, {"type": t, "cron": "* * * * * *", "catch_up": "all"}))
        wait_until(lambda: self.job_ids(t), 10, message="a first occurrence")
        body = self.ok(self.clients[0].post(path + "/pause"))
        self.assertEqual((body["paused"], body["next_run"]), (True, None), body)
        self.assertEqual(len(body["next_runs"]), 5, "the preview still shows the cron's times")
        paused_at = time.time()
        before = sorted(self.job_ids(t))
        time.sleep(2.5)  # what is asserted is that nothing happens: it takes the time itself
        self.assertEqual(sorted(self.job_ids(t)), before)
        shown = self.ok(self.clients[2].get(path))
        self.assertEqual((shown["paused"], shown["enqueued"]), (True, len(before)), shown)
        listed = self.ok(self.clients[2].get("/v1/schedules"))["schedules"]
        self.assertTrue([s["paused"] for s in listed if s["name"] == name][0])
        # Pausing again changes nothing; replacing it keeps it paused.
        self.assertTrue(self.ok(self.clients[1].post(path + "/pause", {}))["paused"])
        replaced = self.ok(self.clients[1].put(path, {"type": t, "cron": "* * * * * *",
                                                      "catch_up": "all"}))
        self.assertTrue(replaced["paused"])
        resumed_at = time.time()
        body = self.ok(self.clients[2].post(path + "/resume"))
        self.assertFalse(body["paused"])
        self.assertGreaterEqual(body["next_run"] / 1000.0, int(resumed_at))
        self.assertEqual(body["skipped"], shown["skipped"], "a pause is not downtime for catch_up")
        wait_until(lambda: len(self.job_ids(t)) > len(before), 10, message="an occurrence after")
        new = occurrence_seconds(name, set(self.job_ids(t)) - set(before))
        self.assertGreaterEqual(min(new), int(resumed_at), "an occurrence from the pause ran")
        self.assertGreater(min(new), paused_at + 2)
        self.assertFalse(self.ok(self.clients[0].post(path + "/resume"))["paused"])
        for route in ("pause", "resume"):
            r = self.clients[0].post("/v1/schedules/%s/%s" % (q(uniq("absent")), route))
            self.assertEqual((r.status, r.json["error"]), (404, "not_found"), r)
            r = self.clients[0].post("%s/%s" % (path, route), {"for_ms": 1000})
            self.assertEqual((r.status, r.json["error"]), (400, "unknown_field"), r)

    def test_cli_pauses_and_resumes(self):
        url = self.servers[0].url
        t, name = self.new_type(), uniq("clipause")
        self.ok(self.clients[0].put("/v1/schedules/%s" % q(name), {"type": t, "cron": "@hourly"}))
        r = run_kvq("schedule", "pause", name, url=url)
        self.assertEqual((r.returncode, r.stdout), (0, "paused schedule %s\n" % name), r)
        r = run_kvq("schedule", "ls", url=url)
        row = [l for l in r.stdout.splitlines() if l.startswith(name + " ")]
        self.assertEqual(row[0].split()[2], "paused", r.stdout)
        r = run_kvq("schedule", "get", name, url=url)
        self.assertIn("next_run:", r.stdout)
        self.assertIn("paused", r.stdout)
        r = run_kvq("schedule", "resume", name, url=url)
        self.assertEqual(r.returncode, 0, r)
        self.assertTrue(r.stdout.startswith("resumed schedule %s; next run 20" % name), r.stdout)
        self.assertFalse(self.ok(self.clients[1].get("/v1/schedules/%s" % q(name)))["paused"])
        r = run_kvq("schedule", "pause", uniq("absent"), url=url)
        self.assertEqual(r.returncode, 5, r)

    def test_cli_puts_lists_gets_and_removes(self):
        url = self.servers[1].url
        t, name = self.new_type(), uniq("cli")
        r = run_kvq("schedule", "put", name, "--type", t, "--cron", "0 9 * * 1-5",
                    "--timezone", "Europe/Paris", "--data", '{"k": 1}', "--priority", "2",
                    "--catch-up", "none", url=url)
        self.assertEqual(r.returncode, 0, r)
        self.assertIn("timezone:", r.stdout)
        self.assertIn("Europe/Paris", r.stdout)
        self.assertIn("next runs:", r.stdout)
        r = run_kvq("schedule", "ls", url=url)
        self.assertEqual(r.returncode, 0, r)
        self.assertTrue(r.stdout.startswith("NAME"), r.stdout)
        self.assertIn(name, r.stdout)
        r = run_kvq("schedule", "get", name, "--json", url=url)
        self.assertEqual(r.returncode, 0, r)
        body = json.loads(r.stdout)
        self.assertEqual((body["cron"], body["data"], body["priority"], body["catch_up"]),
                         ("0 9 * * 1-5", {"k": 1}, 2, "none"))
        self.assertEqual(len(body["next_runs"]), 5)
        r = run_kvq("schedule", "put", name, "--type", t, "--cron", "bogus", url=url)
        self.assertEqual(r.returncode, 2, r)
        self.assertIn("invalid_argument", r.stderr)
        r = run_kvq("schedule", "put", name, "--cron", "@daily", url=url)
        self.assertEqual(r.returncode, 2, r)
        self.assertIn("--type is required", r.stderr)
        r = run_kvq("schedule", "rm", name, url=url)
        self.assertEqual((r.returncode, r.stdout), (0, "removed schedule %s\n" % name), r)
        r = run_kvq("schedule", "get", name, url=url)
        self.assertEqual(r.returncode, 5, r)


if __name__ == "__main__":
    unittest.main()
