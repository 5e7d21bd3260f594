"""Finish with "next" (finish a job and accept the next in one request and one transaction),
accept over several types (POST /v1/accept), an add's own "timeout", and bytes data ("body",
"body_base64") over HTTP, against a real `kvq serve`."""

import base64
import http.client
import json
import socket
import threading
import time
import unittest

from kvq_server import ServerTestCase, q, uniq, wait_until


def in_thread(fn, *args, **kw):
    """Run fn in a thread; returns (thread, result dict with 'value'/'error'/'elapsed')."""
    out = {}

    def run():
        t0 = time.monotonic()
        try:
            out["value"] = fn(*args, **kw)
        except BaseException as e:  # reported by the test
            out["error"] = e
        out["elapsed"] = time.monotonic() - t0

    th = threading.Thread(target=run, daemon=True)
    th.start()
    return th, out


class NextTestCase(ServerTestCase):

    def setUp(self):
        super().setUp()
        self.t = uniq("next")
        self.c.set_timeout(self.t, 30)

    def accept_one(self, t=None, **fields):
        body = self.assertStatus(self.c.accept(t or self.t, **fields), 200)
        [job] = body["jobs"]
        return job

    def finish(self, job, client=None, **fields):
        body = {"lock": job["lock"]}
        body.update(fields)
        nxt = fields.get("next")
        wait = nxt.get("timeout") if isinstance(nxt, dict) else None
        return (client or self.c).post(
            "/v1/jobs/%s/%s/finish" % (q(job["type"]), q(job["id"])), body,
            timeout=max(0, wait if isinstance(wait, (int, float)) else 0) + 15)


class FinishWithNext(NextTestCase):

    def test_finish_with_next_returns_the_next_job_and_records_its_worker(self):
        self.assertStatus(self.c.add(self.t, "j1", {"n": 1}), 200)
        self.assertStatus(self.c.add(self.t, "j2", {"n": 2}), 200)
        first = self.accept_one(worker="w1")
        answer = self.assertStatus(self.finish(first, result={"ok": 1},
                                               next={"worker": "w2"}), 200)
        nxt = answer["next"]
        self.assertEqual((nxt["type"], nxt["data"], nxt["data_format"]),
                         (self.t, {"n": 3 - first["data"]["n"]}, "json"))
        self.assertNotEqual(nxt["lock"], first["lock"])
        done = self.assertJobState(self.t, first["id"], "finished")
        self.assertEqual((done["outcome"], done["result"]), ("succeeded", {"ok": 1}))
        running = self.assertJobState(self.t, nxt["id"], "running")
        self.assertEqual(running["worker"], "w2")
        # The next job's lock works as an accept's does.
        self.assertEqual(self.assertStatus(self.finish(nxt), 200), {})
        self.assertJobState(self.t, nxt["id"], "finished")

    def test_finish_with_next_answers_null_when_no_job_is_due(self):
        self.assertStatus(self.c.add(self.t, "only"), 200)
        self.assertStatus(self.c.add(self.t, "later", scheduled_time=int(time.time() * 1000)
                                     + 3_600_000), 200)
        job = self.accept_one()
        self.assertEqual(self.assertStatus(self.finish(job, next={}), 200), {"next": None})
        self.assertJobState(self.t, "only", "finished")
        self.assertJobState(self.t, "later", "pending")

    def test_a_waiting_next_is_woken_by_an_add_after_the_finish_committed(self):
        self.assertStatus(self.c.add(self.t, "first"), 200)
        job = self.accept_one()
        th, out = in_thread(self.finish, job, self.server.client(), next={"timeout": 10})
        # The finish commits before the wait begins.
        wait_until(lambda: self.c.job(self.t, "first").json["state"] == "finished", 5,
                   message="the finish to commit while its next waits")
        self.assertTrue(th.is_alive(), "finish with next returned before any job came: %r" % out)
        self.assertStatus(self.server.client().add(self.t, "second", {"k": "v"}), 200)
        th.join(12)
        self.assertFalse(th.is_alive())
        self.assertNotIn("error", out)
        nxt = self.assertStatus(out["value"], 200)["next"]
        self.assertEqual((nxt["id"], nxt["data"]), ("second", {"k": "v"}))
        self.assertLess(out["elapsed"], 5.0)
        self.assertJobState(self.t, "second", "running")

    def test_a_waiting_next_answers_null_at_its_timeout(self):
        self.assertStatus(self.c.add(self.t, "first"), 200)
        job = self.accept_one()
        t0 = time.monotonic()
        self.assertEqual(self.assertStatus(self.finish(job, next={"timeout": 0.5}), 200),
                         {"next": None})
        self.assertGreaterEqual(time.monotonic() - t0, 0.45)
        self.assertJobState(self.t, "first", "finished")

    def test_a_client_gone_while_next_waits_keeps_the_finish_and_takes_no_job(self):
        self.assertStatus(self.c.add(self.t, "first"), 200)
        job = self.accept_one()
        body = ('{"lock": "%s", "next": {"timeout": 30}}' % job["lock"]).encode()
        sock = socket.create_connection((self.c.host, self.c.port), timeout=5)
        try:
            sock.sendall(b"POST /v1/jobs/%s/first/finish HTTP/1.1\r\nHost: k\r\n"
                         b"Content-Length: %d\r\n\r\n%s" % (q(self.t).encode(), len(body), body))
            wait_until(lambda: self.c.job(self.t, "first").json["state"] == "finished", 5,
                       message="the finish to commit while its next waits")
        finally:
            sock.close()
        # The server hears of the departure asynchronously; until then the wait could still
        # take a job, which is what this test must rule out.
        time.sleep(0.5)
        self.assertStatus(self.c.add(self.t, "after"), 200)
        taken = self.accept_one(timeout=5)
        self.assertEqual(taken["id"], "after")
        done = self.assertJobState(self.t, "first", "finished")
        self.assertEqual(done["outcome"], "succeeded")

    def test_next_over_two_types_takes_the_best_priority(self):
        other = uniq("next-other")
        self.c.set_timeout(other, 30)
        self.assertStatus(self.c.add(self.t, "start"), 200)
        self.assertStatus(self.c.add(self.t, "low", priority=5), 200)
        self.assertStatus(self.c.add(other, "high", priority=1), 200)
        job = self.accept_one(max_priority=0)
        self.assertEqual(job["id"], "start")
        nxt = self.assertStatus(self.finish(job, next={"types": [self.t, other]}), 200)["next"]
        self.assertEqual((nxt["type"], nxt["id"]), (other, "high"))
        # Without "types", next takes from the finished job's own type.
        nxt2 = self.assertStatus(self.finish(nxt, next={}), 200)["next"]
        self.assertIsNone(nxt2)
        nxt3 = self.assertStatus(self.c.post("/v1/accept", {"types": [other, self.t]}), 200)
        self.assertEqual([j["id"] for j in nxt3["jobs"]], ["low"])

    def test_a_fenced_finish_with_next_is_halted_and_accepts_nothing(self):
        self.assertStatus(self.c.add(self.t, "fenced"), 200)
        job = self.accept_one()
        self.assertStatus(self.c.post("/v1/jobs/%s/fenced/cancel" % q(self.t)), 200)
        self.assertStatus(self.c.add(self.t, "waiting"), 200)
        self.assertStatus(self.finish(job, next={"timeout": 1}), 409, "halted")
        self.assertJobState(self.t, "waiting", "pending")
        self.assertEqual(self.c.job(self.t, "fenced").json["outcome"], "cancelled")

    def test_next_naming_a_type_that_does_not_exist_finishes_nothing(self):
        self.assertStatus(self.c.add(self.t, "kept"), 200)
        job = self.accept_one()
        self.assertStatus(self.finish(job, next={"types": [uniq("missing")]}), 404, "not_found")
        self.assertJobState(self.t, "kept", "running")


class AcceptOverTypes(NextTestCase):

    def test_accept_over_types_takes_the_best_priority_and_names_its_type(self):
        other = uniq("any")
        self.c.set_timeout(other, 30)
        self.assertStatus(self.c.add(self.t, "a", priority=3), 200)
        self.assertStatus(self.c.add(other, "b", priority=2), 200)
        body = self.assertStatus(self.c.post("/v1/accept", {"types": [self.t, other],
                                                            "worker": "w"}), 200)
        self.assertEqual([(j["type"], j["id"]) for j in body["jobs"]], [(other, "b")])
        self.assertEqual(self.c.job(other, "b").json["worker"], "w")

    def test_accept_over_types_long_polls_until_any_of_them_gets_a_job(self):
        other = uniq("any")
        self.c.set_timeout(other, 30)
        th, out = in_thread(self.server.client().post, "/v1/accept",
                            {"types": [self.t, other], "timeout": 10}, timeout=25)
        time.sleep(0.3)  # let the accept start waiting (the point of this test)
        self.assertTrue(th.is_alive(), "accept returned before any job was added: %r" % out)
        self.assertStatus(self.c.add(other, "wake"), 200)
        th.join(12)
        self.assertNotIn("error", out)
        body = self.assertStatus(out["value"], 200)
        self.assertEqual([(j["type"], j["id"]) for j in body["jobs"]], [(other, "wake")])

    def test_accept_over_types_answers_204_when_none_comes(self):
        self.assertEqual(self.c.post("/v1/accept", {"types": [self.t], "timeout": 0.2}).status,
                         204)


class OwnTimeoutAndBytes(NextTestCase):

    def test_a_job_with_its_own_timeout_is_lost_without_a_heartbeat(self):
        self.assertStatus(self.c.add(self.t, "short", timeout=0.5), 200)
        self.assertEqual(self.c.job(self.t, "short").json["timeout"], 0.5)
        self.assertStatus(self.c.add(self.t, "typed"), 200)
        self.assertIsNone(self.c.job(self.t, "typed").json["timeout"])
        taken = {self.accept_one()["id"], self.accept_one()["id"]}
        self.assertEqual(taken, {"short", "typed"})

        def lost():
            job = self.c.job(self.t, "short").json
            return job["state"] == "pending" and [e["kind"] for e in job["errors"]] == ["timeout"]
        # The type's timeout is 30 s: only the job's own 0.5 s can lose it this soon.
        wait_until(lost, 10, message="the job's own timeout to lose its run")
        self.assertJobState(self.t, "typed", "running")

    def test_bytes_with_nul_round_trip_through_body_base64(self):
        raw = b"a\x00b\xff\xfe end"
        encoded = base64.b64encode(raw).decode()
        self.assertStatus(self.c.post("/v1/jobs/%s" % q(self.t),
                                      {"id": "bin", "body_base64": encoded}), 200)
        job = self.c.job(self.t, "bin").json
        self.assertEqual((job["data"], job["data_format"], job["body_base64"]),
                         (None, "bytes", encoded))
        self.assertNotIn("body", job)
        listed = self.c.get("/v1/jobs/%s" % q(self.t)).json["jobs"]
        self.assertEqual([j.get("body_base64") for j in listed], [encoded])
        accepted = self.accept_one()
        self.assertEqual((accepted["data"], accepted["data_format"], accepted["body_base64"]),
                         (None, "bytes", encoded))
        s = self.c.events("/v1/jobs/%s/bin/events" % q(self.t))
        try:
            name, event = s.next_event()
            self.assertEqual((event["data_format"], event["body_base64"]), ("bytes", encoded))
        finally:
            s.close()

    def test_utf8_bytes_show_as_body_and_replace_through_finish(self):
        self.assertStatus(self.c.post("/v1/jobs/%s" % q(self.t),
                                      {"id": "txt", "body": "caf\u00e9\u0000!"}), 200)
        job = self.c.job(self.t, "txt").json
        self.assertEqual((job["data"], job["data_format"], job["body"]),
                         (None, "bytes", "caf\u00e9\u0000!"))
        accepted = self.accept_one()
        self.assertEqual(self.assertStatus(self.finish(accepted, body="done"), 200), {})
        job = self.c.job(self.t, "txt").json
        self.assertEqual((job["data_format"], job["body"]), ("bytes", "done"))


class BadInput(NextTestCase):

    def assertBad(self, r, *words, error="invalid_argument"):
        body = self.assertStatus(r, 400, error)
        for w in words:
            self.assertIn(w, body["message"])

    def test_bad_types_are_400_naming_them(self):
        self.assertBad(self.c.post("/v1/accept", {"types": self.t}), "'types'")
        self.assertBad(self.c.post("/v1/accept", {"types": []}), "'types'")
        self.assertBad(self.c.post("/v1/accept", {"types": [1]}), "'types'")
        self.assertBad(self.c.post("/v1/accept", {"types": [self.t, self.t]}), "twice")
        self.assertBad(self.c.post("/v1/accept", {"types": ["t%d" % i for i in range(65)]}),
                       "'types'", "64")
        self.assertBad(self.c.post("/v1/accept", {}), "'types'")
        self.assertBad(self.c.post("/v1/accept", {"types": [self.t], "count": 2}), "'count'",
                       error="unknown_field")
        self.assertBad(self.c.post("/v1/accept", {"types": [self.t], "timeout": 301}),
                       "'timeout'")

    def test_bad_next_is_400_and_finishes_nothing(self):
        self.assertStatus(self.c.add(self.t, "j"), 200)
        job = self.accept_one()
        self.assertBad(self.finish(job, next=[self.t]), "'next'")
        self.assertBad(self.finish(job, next={"types": "x"}), "in 'next'", "'types'")
        self.assertBad(self.finish(job, next={"timeout": -1}), "in 'next'", "'timeout'")
        self.assertBad(self.finish(job, next={"count": 2}), "'count'", error="unknown_field")
        self.assertJobState(self.t, "j", "running")

    def test_bad_add_timeout_and_payload_are_400_naming_the_field(self):
        for bad in (0, -1, 604801, "soon", True):
            with self.subTest(timeout=bad):
                self.assertBad(self.c.add(self.t, "x", timeout=bad), "'timeout'")
        self.assertBad(self.c.post("/v1/jobs/%s" % q(self.t),
                                   {"id": "x", "data": {}, "body": "b"}), "'body'")
        self.assertBad(self.c.post("/v1/jobs/%s" % q(self.t),
                                   {"id": "x", "body_base64": "not base64!"}), "'body_base64'")
        self.assertBad(self.c.post("/v1/jobs/%s/batch" % q(self.t),
                                   {"jobs": [{"id": "x", "timeout": 0}]}), "'timeout'")
        self.assertEqual(self.c.get("/v1/jobs/%s" % q(self.t)).json["jobs"], [])


class ManyWorkersWithNextAndNoWait(NextTestCase):
    """16 workers on kept-alive connections finishing with `"next": {"timeout": 0}` while 4
    producers add: the benchmark's load. Every request is answered and every job finishes.
    (A finish whose look came after the type's waiters had gone looked with a blocking
    transaction on the server's event loop; finding the due jobs claimed by looks whose commits
    waited for that loop, it slept in retry backoffs: finishes went unanswered for 30 s.)"""

    JOBS = 12000
    WORKERS = 16
    PRODUCERS = 4

    def post(self, conn, path, body):
        t0 = time.monotonic()
        conn.request("POST", path, body=json.dumps(body),
                     headers={"Content-Type": "application/json"})
        r = conn.getresponse()
        payload = r.read()
        return r.status, json.loads(payload) if payload else None, time.monotonic() - t0

    def test_every_finish_is_answered_and_every_job_finishes(self):
        host, port = self.c.host, self.c.port
        base = "/v1/jobs/%s" % q(self.t)
        lock = threading.Lock()
        state = {"next_id": 0, "finished": 0, "slowest": 0.0, "errors": []}
        done_adding = threading.Event()

        def note(elapsed, status, what):
            with lock:
                if what != "accept":  # an accept's own wait is up to 1 s
                    state["slowest"] = max(state["slowest"], elapsed)
                if status != 200 and status != 204:
                    state["errors"].append("%s: %d" % (what, status))

        def producer():
            conn = http.client.HTTPConnection(host, port, timeout=20)
            try:
                while True:
                    with lock:
                        n = state["next_id"]
                        if n >= self.JOBS:
                            return
                        state["next_id"] = n + 1
                    status, _, elapsed = self.post(conn, base, {"id": "j%d" % n, "data": {}})
                    note(elapsed, status, "add")
            except Exception as e:  # reported by the test
                with lock:
                    state["errors"].append("add: %r" % e)
            finally:
                conn.close()

        def worker():
            conn = http.client.HTTPConnection(host, port, timeout=20)
            job = None
            try:
                while True:
                    with lock:
                        if state["finished"] >= self.JOBS:
                            return
                    if job is None:
                        status, body, elapsed = self.post(
                            conn, "/v1/accept/%s" % q(self.t), {"timeout": 1})
                        note(elapsed, status, "accept")
                        if status == 204:
                            continue
                        [job] = body["jobs"]
                    status, body, elapsed = self.post(
                        conn, "%s/%s/finish" % (base, q(job["id"])),
                        {"lock": job["lock"], "next": {"timeout": 0}})
                    note(elapsed, status, "finish")
                    if status != 200:
                        return
                    with lock:
                        state["finished"] += 1
                    nxt = body.get("next")
                    job = nxt if isinstance(nxt, dict) else None
            except Exception as e:  # a request unanswered for 20 s lands here
                with lock:
                    state["errors"].append("worker: %r" % e)
            finally:
                conn.close()

        threads = [threading.Thread(target=producer, daemon=True)
                   for _ in range(self.PRODUCERS)]
        threads += [threading.Thread(target=worker, daemon=True) for _ in range(self.WORKERS)]
        for th in threads:
            th.start()
        for th in threads:
            th.join(timeout=120)
        self.assertEqual(state["errors"], [])
        self.assertEqual(state["finished"], self.JOBS)
        self.assertLess(state["slowest"], 10.0,
                        "a request took %.1f s to be answered" % state["slowest"])


class FinishMany(NextTestCase):

    def take(self, n):
        for i in range(n):
            self.assertStatus(self.c.add(self.t, "m%d" % i, {"n": i}), 200)
        body = self.assertStatus(self.c.accept(self.t, count=n), 200)
        self.assertEqual(len(body["jobs"]), n)
        return body["jobs"]

    def finish_many(self, jobs, results=None):
        items = []
        for i, job in enumerate(jobs):
            item = {"type": job["type"], "id": job["id"], "lock": job["lock"]}
            if results is not None:
                item["result"] = results[i]
            items.append(item)
        return self.c.post("/v1/finish", {"jobs": items})

    def test_every_job_finishes_with_its_own_result(self):
        jobs = self.take(3)
        body = self.assertStatus(self.finish_many(jobs, [{"r": j["id"]} for j in jobs]), 200)
        self.assertEqual([(r["id"], r["ok"]) for r in body["results"]],
                         [(j["id"], True) for j in jobs])
        for job in jobs:
            got = self.assertStatus(self.c.job(self.t, job["id"]), 200)
            self.assertEqual(got["outcome"], "succeeded")
            self.assertEqual(got["result"], {"r": job["id"]})

    def test_a_cancelled_job_fails_alone_and_a_retry_is_recognised(self):
        jobs = self.take(3)
        self.assertStatus(self.c.post("/v1/jobs/%s/%s/cancel" % (q(self.t), q(jobs[1]["id"]))),
                          200)
        body = self.assertStatus(self.finish_many(jobs), 200)
        [a, b, c] = body["results"]
        self.assertTrue(a["ok"])
        self.assertEqual((b["ok"], b["error"]), (False, "halted"))
        self.assertIn("cancelled", b["message"])
        self.assertTrue(c["ok"])
        self.assertEqual(self.c.job(self.t, jobs[1]["id"]).json["outcome"], "cancelled")
        # The same request again, as after a lost answer: the finishes it made are its own.
        again = self.assertStatus(self.finish_many(jobs), 200)
        self.assertEqual([r["ok"] for r in again["results"]], [True, False, True])

    def test_bad_input_is_400_naming_the_job_and_finishes_nothing(self):
        jobs = self.take(2)
        no_lock = [{"type": self.t, "id": jobs[0]["id"], "lock": jobs[0]["lock"]},
                   {"type": self.t, "id": jobs[1]["id"]}]
        self.assertStatus(self.c.post("/v1/finish", {"jobs": no_lock}), 400, "invalid_argument")
        self.assertIn("jobs[1]", self.c.post("/v1/finish", {"jobs": no_lock}).json["message"])
        twice = [jobs[0], jobs[0]]
        self.assertStatus(self.finish_many(twice), 400, "invalid_argument")
        self.assertStatus(self.c.post("/v1/finish", {"jobs": []}), 400, "invalid_argument")
        self.assertStatus(self.c.post("/v1/finish", {}), 400, "invalid_argument")
        extra = [{"type": self.t, "id": jobs[0]["id"], "lock": jobs[0]["lock"], "next": {}}]
        self.assertStatus(self.c.post("/v1/finish", {"jobs": extra}), 400, "unknown_field")
        for job in jobs:
            self.assertEqual(self.c.job(self.t, job["id"]).json["state"], "running")


if __name__ == "__main__":
    unittest.main()
