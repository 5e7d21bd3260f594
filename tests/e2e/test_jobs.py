"""Health, types and the jobs routes: the plain request/response part of the API."""

import threading
import time
import unittest

from kvq_server import KvqServer, ServerTestCase, q, uniq

JOB_FIELDS = {"type", "id", "state", "data", "scheduled_time", "priority", "resubmitted",
              "worker", "worker_type", "attempts", "lost_runs", "gave_up", "created_at", "updated_at",
              "outcome", "result", "progress", "errors", "started_at", "ended_at", "group",
              "data_format", "timeout"}
# A type's retry policy and flow control as GET shows them when none was set (kvq/jobs.h
# RetryPolicy's defaults; not paused, no limits).
SETTING_DEFAULTS = {"max_attempts": 25,
                    "backoff": {"base": 1.0, "factor": 2.0, "cap": 3600.0, "jitter": 0.2},
                    "paused": False, "paused_until": None, "max_running": None, "rate": None,
                    "max_running_per_group": None, "has_groups": False}


class HealthAndTypes(ServerTestCase):

    def test_healthz_reports_ok_and_store(self):
        r = self.c.get("/healthz")
        body = self.assertStatus(r, 200)
        self.assertEqual(body["status"], "ok", r)
        self.assertIn("lmdb:", body["store"], r)
        self.assertIn(self.server.data_dir, body["store"], r)
        self.assertIn("relaxed", body["store"], r)

    def test_types_put_get_list_delete(self):
        t = uniq("types")
        self.assertStatus(self.c.get("/v1/types/%s" % t), 404, "not_found")
        body = self.assertStatus(self.c.put("/v1/types/%s" % t, {"timeout": 30}), 200)
        self.assertEqual(body, {"type": t, "timeout": 30.0, "finished_retention": None, "max_lost_runs": None, **SETTING_DEFAULTS})
        body = self.assertStatus(self.c.get("/v1/types/%s" % t), 200)
        self.assertEqual(body, {"type": t, "timeout": 30.0, "finished_retention": None, "max_lost_runs": None, **SETTING_DEFAULTS})
        # a fractional timeout, replacing the old one
        body = self.assertStatus(self.c.put("/v1/types/%s" % t, {"timeout": 2.5}), 200)
        self.assertEqual(body, {"type": t, "timeout": 2.5, "finished_retention": None, "max_lost_runs": None, **SETTING_DEFAULTS})
        types = self.assertStatus(self.c.get("/v1/types"), 200)["types"]
        self.assertIn({"type": t, "timeout": 2.5, "finished_retention": None, "max_lost_runs": None, **SETTING_DEFAULTS}, types)
        self.assertEqual(self.assertStatus(self.c.delete("/v1/types/%s" % t), 200), {})
        self.assertStatus(self.c.get("/v1/types/%s" % t), 404, "not_found")
        self.assertStatus(self.c.delete("/v1/types/%s" % t), 404, "not_found")
        types = self.assertStatus(self.c.get("/v1/types"), 200)["types"]
        self.assertNotIn(t, [x["type"] for x in types])

    def test_a_type_name_may_have_200_bytes(self):
        t = uniq("long")
        t += "t" * (200 - len(t))
        self.assertStatus(self.c.put("/v1/types/%s" % t, {"timeout": 30}), 200)
        jid = "i" * 256  # the longest id still fits a key with the longest type
        self.assertStatus(self.c.add(t, jid), 200)
        self.assertEqual(self.assertStatus(self.c.job(t, jid), 200)["state"], "pending")
        self.assertStatus(self.c.put("/v1/types/%s" % (t + "t"), {"timeout": 30}), 400,
                          "invalid_argument")

    def test_finished_retention_is_set_kept_by_a_timeout_change_and_cleared_with_null(self):
        t = uniq("retained")
        body = self.assertStatus(self.c.put("/v1/types/%s" % t,
                                            {"timeout": 30, "finished_retention": 86400}), 200)
        self.assertEqual(body, {"type": t, "timeout": 30.0, "finished_retention": 86400.0, "max_lost_runs": None, **SETTING_DEFAULTS})
        # a PUT without the field changes the timeout only
        body = self.assertStatus(self.c.put("/v1/types/%s" % t, {"timeout": 10}), 200)
        self.assertEqual(body, {"type": t, "timeout": 10.0, "finished_retention": 86400.0, "max_lost_runs": None, **SETTING_DEFAULTS})
        self.assertEqual(self.assertStatus(self.c.get("/v1/types/%s" % t), 200), body)
        body = self.assertStatus(self.c.put("/v1/types/%s" % t,
                                            {"timeout": 10, "finished_retention": None}), 200)
        self.assertEqual(body, {"type": t, "timeout": 10.0, "finished_retention": None, "max_lost_runs": None, **SETTING_DEFAULTS})
        # the retention alone, for a type that exists
        body = self.assertStatus(self.c.put("/v1/types/%s" % t, {"finished_retention": 60}), 200)
        self.assertEqual(body, {"type": t, "timeout": 10.0, "finished_retention": 60.0, "max_lost_runs": None, **SETTING_DEFAULTS})
        absent = uniq("absent")
        self.assertStatus(self.c.put("/v1/types/%s" % absent, {"finished_retention": 60}), 404,
                          "not_found")
        self.assertStatus(self.c.get("/v1/types/%s" % absent), 404, "not_found")
        self.assertStatus(self.c.put("/v1/types/%s" % t, {}), 400, "invalid_argument")

    def test_a_finished_job_is_removed_once_its_retention_has_passed(self):
        t = uniq("expiring")
        self.assertStatus(self.c.put("/v1/types/%s" % t, {"timeout": 30, "finished_retention": 1}),
                          200)
        self.assertStatus(self.c.add(t, "done"), 200)
        self.assertStatus(self.c.add(t, "later", scheduled_time=int(time.time() * 1000) + 3600000),
                          200)
        job = self.assertStatus(self.c.accept(t), 200)["jobs"][0]
        self.assertStatus(self.c.post("/v1/jobs/%s/done/finish" % t, {"lock": job["lock"]}), 200)
        finished = time.monotonic()
        self.assertEqual(self.assertStatus(self.c.job(t, "done"), 200)["state"], "finished")
        while self.c.job(t, "done").status == 200 and time.monotonic() - finished < 10:
            time.sleep(0.02)
        kept_for = time.monotonic() - finished
        self.assertStatus(self.c.job(t, "done"), 404, "not_found")
        self.assertGreaterEqual(kept_for, 0.95, "removed before its retention passed")
        self.assertEqual(self.assertStatus(self.c.job(t, "later"), 200)["state"], "pending")
        metrics = self.c.get("/metrics").body.decode()
        removed = [line for line in metrics.splitlines()
                   if line.startswith("kvq_retention_removals_total ")]
        self.assertEqual(len(removed), 1, metrics)
        self.assertGreaterEqual(float(removed[0].split()[1]), 1)

    def test_type_names_with_all_allowed_characters(self):
        t = "A-z_0.9:" + uniq("x")
        body = self.assertStatus(self.c.put("/v1/types/%s" % q(t), {"timeout": 1}), 200)
        self.assertEqual(body["type"], t)
        self.assertStatus(self.c.add(t, "id with spaces/and/slashes ü"), 200)
        job = self.assertStatus(self.c.job(t, "id with spaces/and/slashes ü"), 200)
        self.assertEqual(job["id"], "id with spaces/and/slashes ü")
        self.assertEqual(job["type"], t)


class JobRoutes(ServerTestCase):

    def setUp(self):
        super().setUp()
        self.t = uniq("jobs")
        self.c.set_timeout(self.t, 30)

    def test_full_lifecycle_add_accept_update_finish(self):
        t, c = self.t, self.c
        wtype = uniq("wt")
        reg = self.assertStatus(c.post("/v1/workers/%s" % wtype, {"id": "w1"}), 200)
        self.assertEqual(reg["id"], "w1")

        self.assertEqual(self.assertStatus(c.add(t, "j1", {"k": 1}), 200), {"id": "j1", "added": True})
        job = self.assertStatus(c.job(t, "j1"), 200)
        self.assertEqual(set(job), JOB_FIELDS, job)
        self.assertEqual((job["type"], job["id"], job["state"], job["data"]),
                         (t, "j1", "pending", {"k": 1}))
        self.assertEqual((job["priority"], job["resubmitted"], job["worker"], job["attempts"]),
                         (0, False, "", 0))
        now_ms = time.time() * 1000
        self.assertLess(abs(job["created_at"] - now_ms), 60000, job)
        self.assertLessEqual(job["scheduled_time"], now_ms + 1000, job)

        acc = self.assertStatus(c.accept(t, timeout=5, worker="w1"), 200)
        self.assertEqual(len(acc["jobs"]), 1, acc)
        got = acc["jobs"][0]
        self.assertEqual((got["type"], got["id"], got["data"]), (t, "j1", {"k": 1}))
        lock = got["lock"]
        self.assertIsInstance(lock, str)
        self.assertTrue(lock)
        job = self.assertJobState(t, "j1", "running")
        self.assertEqual(job["worker"], "w1")
        self.assertEqual(job["attempts"], 1)

        r = c.post("/v1/jobs/%s/j1/update" % t, {"lock": lock, "data": {"progress": 50}})
        self.assertEqual(self.assertStatus(r, 200), {"resubmitted": False})
        job = self.assertJobState(t, "j1", "running")
        self.assertEqual(job["data"], {"progress": 50})
        # update without data is a plain heartbeat
        self.assertStatus(c.post("/v1/jobs/%s/j1/update" % t, {"lock": lock}), 200)

        r = c.post("/v1/jobs/%s/j1/finish" % t, {"lock": lock, "data": {"result": "ok"}})
        self.assertEqual(self.assertStatus(r, 200), {})
        job = self.assertJobState(t, "j1", "finished")
        self.assertEqual(job["data"], {"result": "ok"})
        # the lock no longer holds the job: updates halt
        self.assertStatus(c.post("/v1/jobs/%s/j1/update" % t, {"lock": lock}), 409, "halted")

    def test_finish_retried_with_same_lock_succeeds_and_changes_nothing(self):
        # A retry (e.g. after a lost response) must not be an error, nor re-apply data.
        # NOTE: the library (worker_ops.cc finish_checked) makes finish idempotent by
        # design; docs/http-api.md does not say so (its 409 text suggests halted).
        t, c = self.t, self.c
        self.assertStatus(c.add(t, "f1"), 200)
        lock = self.assertStatus(c.accept(t), 200)["jobs"][0]["lock"]
        self.assertStatus(c.post("/v1/jobs/%s/f1/finish" % t, {"lock": lock, "data": {"r": 1}}), 200)
        self.assertStatus(c.post("/v1/jobs/%s/f1/finish" % t, {"lock": lock, "data": {"r": 2}}), 200)
        self.assertEqual(self.assertJobState(t, "f1", "finished")["data"], {"r": 1})

    def test_add_to_running_job_marks_it_resubmitted(self):
        # running -> marked resubmitted (data unchanged); finish -> pending again
        t, c = self.t, self.c
        self.assertStatus(c.add(t, "r1", {"v": 1}), 200)
        lock = self.assertStatus(c.accept(t), 200)["jobs"][0]["lock"]
        self.assertStatus(c.add(t, "r1", {"v": 2}), 200)
        job = self.assertJobState(t, "r1", "running")
        self.assertEqual((job["resubmitted"], job["data"]), (True, {"v": 1}))
        r = c.post("/v1/jobs/%s/r1/update" % t, {"lock": lock})
        self.assertEqual(self.assertStatus(r, 200), {"resubmitted": True})
        self.assertStatus(c.post("/v1/jobs/%s/r1/finish" % t, {"lock": lock}), 200)
        job = self.assertJobState(t, "r1", "pending")
        self.assertFalse(job["resubmitted"])
        self.assertEqual(self.assertStatus(c.accept(t), 200)["jobs"][0]["id"], "r1")

    def test_resubmit_runs_job_again_after_finish_at_given_time(self):
        t, c = self.t, self.c
        self.assertStatus(c.add(t, "s1"), 200)
        lock = self.assertStatus(c.accept(t), 200)["jobs"][0]["lock"]
        later = int(time.time() * 1000) + 3600_000
        r = c.post("/v1/jobs/%s/s1/resubmit" % t, {"lock": lock, "scheduled_time": later,
                                                    "data": {"again": True}})
        self.assertEqual(self.assertStatus(r, 200), {})
        job = self.assertJobState(t, "s1", "running")
        self.assertTrue(job["resubmitted"], job)
        r = c.post("/v1/jobs/%s/s1/update" % t, {"lock": lock})
        self.assertEqual(self.assertStatus(r, 200), {"resubmitted": True})
        self.assertStatus(c.post("/v1/jobs/%s/s1/finish" % t, {"lock": lock}), 200)
        job = self.assertJobState(t, "s1", "pending")
        self.assertEqual(job["scheduled_time"], later)
        self.assertEqual(job["data"], {"again": True})
        self.assertStatus(c.accept(t), 204)  # not due for an hour

    def test_list_filters_by_state_and_pages_in_id_order(self):
        t, c = self.t, self.c
        ids = ["a%02d" % i for i in range(7)]
        for i in reversed(ids):
            self.assertStatus(c.add(t, i), 200)
        # two of them become running (which two is not this test's concern)
        acc = self.assertStatus(c.accept(t, count=2), 200)["jobs"]
        running = sorted(j["id"] for j in acc)
        self.assertEqual(len(running), 2)

        seen, cursor, pages = [], None, 0
        while True:
            path = "/v1/jobs/%s?state=pending&limit=2" % t
            if cursor:
                path += "&cursor=" + q(cursor)
            page = self.assertStatus(c.get(path), 200)
            pages += 1
            self.assertLessEqual(len(page["jobs"]), 2, page)
            self.assertTrue(all(j["state"] == "pending" for j in page["jobs"]), page)
            seen += [j["id"] for j in page["jobs"]]
            cursor = page["next_cursor"]
            if cursor == "":
                break
            self.assertLess(pages, 10, "paging does not end")
        expected = sorted(set(ids) - set(running))
        self.assertEqual(seen, expected)
        self.assertGreaterEqual(pages, 3)

        page = self.assertStatus(c.get("/v1/jobs/%s?state=running" % t), 200)
        self.assertEqual([j["id"] for j in page["jobs"]], running)
        self.assertEqual(page["next_cursor"], "")
        page = self.assertStatus(c.get("/v1/jobs/%s" % t), 200)
        self.assertEqual([j["id"] for j in page["jobs"]], ids)
        page = self.assertStatus(c.get("/v1/jobs/%s?state=finished" % t), 200)
        self.assertEqual(page, {"jobs": [], "next_cursor": ""})

    def test_list_filters_by_worker(self):
        t, c = self.t, self.c
        wtype = uniq("wt")
        self.assertStatus(c.post("/v1/workers/%s" % wtype, {"id": "lw"}), 200)
        for i in ("x1", "x2"):
            self.assertStatus(c.add(t, i), 200)
        got = self.assertStatus(c.accept(t, worker="lw"), 200)["jobs"][0]["id"]
        page = self.assertStatus(c.get("/v1/jobs/%s?worker=lw" % t), 200)
        self.assertEqual([j["id"] for j in page["jobs"]], [got])

    def test_pending_count_respects_schedule_and_limit(self):
        t, c = self.t, self.c
        future = int(time.time() * 1000) + 3600_000
        self.assertStatus(c.add(t, "p1"), 200)
        self.assertStatus(c.add(t, "p2"), 200)
        self.assertStatus(c.add(t, "p3", scheduled_time=future), 200)
        self.assertEqual(self.assertStatus(c.get("/v1/types/%s/pending" % t), 200), {"pending": 2})
        r = c.get("/v1/types/%s/pending?max_scheduled_time=%d" % (t, future + 1))
        self.assertEqual(self.assertStatus(r, 200), {"pending": 3})
        r = c.get("/v1/types/%s/pending?limit=1" % t)
        self.assertEqual(self.assertStatus(r, 200), {"pending": 1})
        self.assertStatus(c.accept(t), 200)
        self.assertEqual(self.assertStatus(c.get("/v1/types/%s/pending" % t), 200), {"pending": 1})

    def test_accept_max_priority_skips_lower_priority_jobs(self):
        t, c = self.t, self.c
        self.assertStatus(c.add(t, "lo", priority=5), 200)
        self.assertStatus(c.add(t, "hi", priority=1), 200)
        acc = self.assertStatus(c.accept(t, max_priority=1, count=10), 200)
        self.assertEqual([j["id"] for j in acc["jobs"]], ["hi"])
        self.assertStatus(c.accept(t, max_priority=1), 204)
        self.assertEqual(self.assertStatus(c.accept(t), 200)["jobs"][0]["id"], "lo")

    def test_batch_add_is_all_or_nothing(self):
        t, c = self.t, self.c
        jobs = [{"id": "b%d" % i, "data": {"i": i}} for i in range(3)]
        r = c.post("/v1/jobs/%s/batch" % t, {"jobs": jobs})
        self.assertEqual(self.assertStatus(r, 200), {"added": 3, "kept": []})
        for i in range(3):
            self.assertEqual(self.assertJobState(t, "b%d" % i, "pending")["data"], {"i": i})
        # one bad id -> nothing added
        bad = [{"id": "c1", "data": {}}, {"id": "", "data": {}}]
        self.assertStatus(c.post("/v1/jobs/%s/batch" % t, {"jobs": bad}), 400, "invalid_argument")
        self.assertStatus(c.job(t, "c1"), 404, "not_found")
        # more than 1,000 -> nothing added
        many = [{"id": "m%d" % i, "data": {}} for i in range(1001)]
        self.assertStatus(c.post("/v1/jobs/%s/batch" % t, {"jobs": many}), 400, "invalid_argument")
        self.assertStatus(c.job(t, "m0"), 404, "not_found")
        # exactly 1,000 is fine
        r = c.post("/v1/jobs/%s/batch" % t, {"jobs": many[:1000]})
        self.assertEqual(self.assertStatus(r, 200), {"added": 1000, "kept": []})
        self.assertEqual(self.assertStatus(c.get("/v1/types/%s/pending" % t), 200),
                         {"pending": 1003})

    def test_delete_removes_job_and_halts_its_worker(self):
        t, c = self.t, self.c
        self.assertStatus(c.add(t, "d1"), 200)
        self.assertEqual(self.assertStatus(c.delete("/v1/jobs/%s/d1" % t), 200), {})
        self.assertStatus(c.job(t, "d1"), 404, "not_found")
        self.assertStatus(c.delete("/v1/jobs/%s/d1" % t), 404, "not_found")

        self.assertStatus(c.add(t, "d2"), 200)
        lock = self.assertStatus(c.accept(t), 200)["jobs"][0]["lock"]
        self.assertStatus(c.delete("/v1/jobs/%s/d2" % t), 200)
        self.assertStatus(c.post("/v1/jobs/%s/d2/update" % t, {"lock": lock}), 409, "halted")
        self.assertStatus(c.post("/v1/jobs/%s/d2/finish" % t, {"lock": lock}), 409, "halted")
        self.assertStatus(c.job(t, "d2"), 404, "not_found")


class TypeLifecycle(ServerTestCase):
    """A type that does not exist is reported, and deleting a type never strands its jobs."""

    def test_calls_naming_a_type_that_does_not_exist_answer_404(self):
        c, t = self.c, uniq("emial")
        for what, r in (("list", c.get("/v1/jobs/%s" % t)),
                        ("pending count", c.get("/v1/types/%s/pending" % t)),
                        ("accept", c.accept(t)),
                        ("accept 3", c.accept(t, count=3))):
            with self.subTest(what):
                self.assertStatus(r, 404, "not_found")
                self.assertIn("'%s' does not exist" % t, r.json["message"])
        started = time.monotonic()
        self.assertStatus(c.accept(t, timeout=5), 404, "not_found")
        self.assertStatus(c.accept(t, timeout=5, count=2), 404, "not_found")
        self.assertLess(time.monotonic() - started, 4, "the accepts waited for their timeouts")
        from test_cli import run_kvq  # the CLI exits 5 (not found) and names the type
        for args in (("ls", t), ("accept", t), ("accept", t, "--timeout", "5")):
            with self.subTest(args=args):
                r = run_kvq(*args, url=self.server.url)
                self.assertEqual(r.returncode, 5, r)
                self.assertIn(t, r.stderr)

    def test_delete_is_refused_while_the_type_has_jobs_and_remove_all_fences_its_worker(self):
        c, t = self.c, uniq("bulk")
        c.set_timeout(t, 60)
        n = 1200  # several of the library's removal batches
        for start in range(0, n, 1000):
            batch = [{"id": "j%05d" % i, "data": {"i": i}} for i in range(start, min(n, start + 1000))]
            self.assertStatus(c.post("/v1/jobs/%s/batch" % t, {"jobs": batch}), 200)
        acc = self.assertStatus(c.accept(t, worker="w1"), 200)["jobs"][0]
        r = c.delete("/v1/types/%s" % t)
        self.assertStatus(r, 409, "type_has_jobs")
        self.assertIn("%d pending, 1 running, 0 finished" % (n - 1), r.json["message"])
        self.assertIn("DELETE /v1/types/%s/jobs" % t, r.json["message"])
        self.assertEqual(self.assertStatus(c.get("/v1/types/%s" % t), 200)["timeout"], 60.0)
        self.assertStatus(c.post("/v1/jobs/%s/%s/update" % (t, acc["id"]), {"lock": acc["lock"]}), 200)

        self.assertEqual(self.assertStatus(c.delete("/v1/types/%s/jobs" % t), 200), {"removed": n})
        self.assertStatus(c.post("/v1/jobs/%s/%s/update" % (t, acc["id"]), {"lock": acc["lock"]}),
                          409, "halted")
        self.assertStatus(c.post("/v1/jobs/%s/%s/finish" % (t, acc["id"]), {"lock": acc["lock"]}),
                          409, "halted")
        self.assertEqual(self.assertStatus(c.get("/v1/jobs/%s" % t), 200)["jobs"], [])
        self.assertEqual(self.assertStatus(c.delete("/v1/types/%s/jobs" % t), 200), {"removed": 0})

        self.assertEqual(self.assertStatus(c.delete("/v1/types/%s" % t), 200), {})
        c.set_timeout(t, 60)
        self.assertEqual(self.assertStatus(c.get("/v1/jobs/%s" % t), 200)["jobs"], [],
                         "no old job comes back with the type")
        self.assertStatus(c.job(t, "j00001"), 404, "not_found")
        self.assertEqual(self.assertStatus(c.get("/v1/types/%s/pending" % t), 200), {"pending": 0})


class ServerProcess(unittest.TestCase):

    def test_sigterm_answers_waiting_accept_with_204_and_exits(self):
        s = KvqServer().start()
        try:
            c = s.client()
            c.set_timeout("t", 30)
            out = {}

            def poll():
                t0 = time.monotonic()
                out["r"] = c.accept("t", timeout=30)
                out["elapsed"] = time.monotonic() - t0
            th = threading.Thread(target=poll, daemon=True)
            th.start()
            time.sleep(0.3)  # let the accept start waiting
            t0 = time.monotonic()
            self.assertTrue(s.stop(grace=10), "kvq serve ignored SIGTERM for 10 s")
            th.join(5)
            self.assertIn("r", out, "the waiting accept got no answer")
            self.assertEqual(out["r"].status, 204, out["r"])
            self.assertLess(out["elapsed"], 10)
            self.assertEqual(s.proc.returncode, 0, s.stderr())
        finally:
            s.cleanup()

    def test_two_servers_share_one_store(self):
        a = KvqServer().start()
        self.addCleanup(a.cleanup)
        b = KvqServer(data_dir=a.data_dir).start()
        self.addCleanup(b.cleanup)
        ca, cb = a.client(), b.client()
        ca.set_timeout("shared", 30)
        self.assertEqual(cb.get("/v1/types/shared").status, 200)
        out = {}
        th = threading.Thread(target=lambda: out.update(r=ca.accept("shared", timeout=10)),
                              daemon=True)
        th.start()
        time.sleep(0.3)  # let the accept on server A start waiting
        t0 = time.monotonic()
        self.assertEqual(cb.add("shared", "x").status, 200)
        th.join(12)
        self.assertEqual(out["r"].status, 200, out.get("r"))
        self.assertLess(time.monotonic() - t0, 3)
        lock = out["r"].json["jobs"][0]["lock"]
        r = cb.post("/v1/jobs/shared/x/finish", {"lock": lock})
        self.assertEqual(r.status, 200, r)
        self.assertEqual(ca.job("shared", "x").json["state"], "finished")

    def test_sigterm_stops_server_within_10s(self):
        s = KvqServer().start()
        try:
            self.assertEqual(s.client().get("/healthz").status, 200)
            self.assertRegex(s.first_line, r"^kvq serve: listening on http://127\.0\.0\.1:\d+ ")
            self.assertTrue(s.stop(grace=10), "kvq serve ignored SIGTERM for 10 s")
        finally:
            s.cleanup()


if __name__ == "__main__":
    unittest.main()
