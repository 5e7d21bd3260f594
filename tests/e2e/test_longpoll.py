"""Long-polls (accept, wait) and the job event stream."""

import socket
import threading
import time
import unittest

from kvq_server import ServerTestCase, uniq


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


class LongPolls(ServerTestCase):

    def setUp(self):
        super().setUp()
        self.t = uniq("lp")
        self.c.set_timeout(self.t, 30)

    def test_accept_long_poll_is_woken_by_add_from_another_client(self):
        t = self.t
        th, out = in_thread(self.server.client().accept, t, timeout=10)
        time.sleep(0.3)  # let the accept start waiting (the point of this test)
        self.assertTrue(th.is_alive(), "accept returned before any job was added: %r" % out)
        self.assertStatus(self.server.client().add(t, "wake", {"x": 1}), 200)
        th.join(12)
        self.assertFalse(th.is_alive())
        self.assertNotIn("error", out)
        body = self.assertStatus(out["value"], 200)
        self.assertEqual([(j["id"], j["data"]) for j in body["jobs"]], [("wake", {"x": 1})])
        self.assertLess(out["elapsed"], 3.0, "woken accept took %.2f s" % out["elapsed"])
        self.assertJobState(t, "wake", "running")

    def test_accept_returns_204_after_its_timeout(self):
        t0 = time.monotonic()
        r = self.c.accept(self.t, timeout=0.5)
        elapsed = time.monotonic() - t0
        self.assertEqual(r.status, 204, r)
        self.assertEqual(r.body, b"", r)
        self.assertGreaterEqual(elapsed, 0.45)
        self.assertLess(elapsed, 5.0)

    def test_accept_without_timeout_returns_204_at_once(self):
        t0 = time.monotonic()
        self.assertStatus(self.c.accept(self.t), 204)
        self.assertLess(time.monotonic() - t0, 2.0)

    def test_accept_count_returns_several_jobs(self):
        t, c = self.t, self.c
        for i in range(5):
            self.assertStatus(c.add(t, "n%d" % i, {"i": i}), 200)
        first = self.assertStatus(c.accept(t, timeout=5, count=3), 200)["jobs"]
        self.assertEqual(len(first), 3, first)
        rest = self.assertStatus(c.accept(t, timeout=5, count=10), 200)["jobs"]
        self.assertEqual(len(rest), 2, rest)
        ids = [j["id"] for j in first + rest]
        self.assertEqual(sorted(ids), ["n%d" % i for i in range(5)])
        self.assertEqual(len({j["lock"] for j in first + rest}), 5)
        self.assertEqual(self.assertStatus(c.get("/v1/types/%s/pending" % t), 200), {"pending": 0})

    def test_waiting_accept_count_takes_a_whole_burst(self):
        t, c = self.t, self.c
        th, out = in_thread(self.server.client().accept, t, timeout=10, count=10)
        time.sleep(0.3)
        self.assertTrue(th.is_alive(), "accept returned before any job was added: %r" % out)
        jobs = [{"id": "burst%d" % i, "data": {"i": i}} for i in range(4)]
        self.assertStatus(c.post("/v1/jobs/%s/batch" % t, {"jobs": jobs}), 200)
        th.join(12)
        self.assertFalse(th.is_alive())
        got = self.assertStatus(out["value"], 200)["jobs"]
        self.assertEqual(sorted(j["id"] for j in got), ["burst%d" % i for i in range(4)],
                         "the four were added in one transaction, so one wake-up sees them all")
        self.assertEqual(len({j["lock"] for j in got}), 4)

    def test_wait_returns_when_job_finishes(self):
        t, c = self.t, self.c
        self.assertStatus(c.add(t, "w1"), 200)
        lock = self.assertStatus(c.accept(t), 200)["jobs"][0]["lock"]
        th, out = in_thread(self.server.client().get, "/v1/jobs/%s/w1/wait?timeout=10" % t)
        time.sleep(0.3)
        self.assertTrue(th.is_alive(), "wait returned before the job finished: %r" % out)
        self.assertStatus(c.post("/v1/jobs/%s/w1/finish" % t, {"lock": lock, "data": {"r": 1}}), 200)
        th.join(12)
        self.assertNotIn("error", out)
        ev = self.assertStatus(out["value"], 200)
        self.assertEqual((ev["type"], ev["id"], ev["found"], ev["state"], ev["data"]),
                         (t, "w1", True, "finished", {"r": 1}))
        self.assertIsInstance(ev["seq"], int)
        self.assertLess(out["elapsed"], 3.0)

    def test_wait_for_state_already_reached_returns_at_once(self):
        t, c = self.t, self.c
        self.assertStatus(c.add(t, "w2"), 200)
        t0 = time.monotonic()
        ev = self.assertStatus(c.get("/v1/jobs/%s/w2/wait?state=pending&timeout=10" % t), 200)
        self.assertLess(time.monotonic() - t0, 2.0)
        self.assertEqual(ev["state"], "pending")

    def test_wait_for_state_already_reached_many_times_keeps_server_up(self):
        # Repeats the immediate-answer case: it once crashed the server (SIGABRT in
        # Beast's stream_base pending_guard) within a few dozen requests.
        t, c = self.t, self.c
        self.assertStatus(c.add(t, "rep"), 200)
        for i in range(200):
            r = c.get("/v1/jobs/%s/rep/wait?state=pending&timeout=10" % t)
            self.assertEqual((r.status, r.json["state"]), (200, "pending"), "request %d: %r" % (i, r))

    def test_keep_alive_connection_serves_several_requests(self):
        import http.client
        t = self.t
        conn = http.client.HTTPConnection(self.c.host, self.c.port, timeout=10)
        try:
            for i in range(3):
                conn.request("POST", "/v1/jobs/%s" % t, body='{"id": "k%d", "data": {}}' % i,
                             headers={"Content-Type": "application/json"})
                r = conn.getresponse()
                self.assertEqual((r.status, r.read()), (200, b'{"added":true,"id":"k%d"}' % i))
            conn.request("GET", "/v1/types/%s/pending" % t)
            r = conn.getresponse()
            self.assertEqual(r.status, 200)
            self.assertEqual(__import__("json").loads(r.read()), {"pending": 3})
        finally:
            conn.close()

    def test_wait_returns_204_after_its_timeout(self):
        t, c = self.t, self.c
        self.assertStatus(c.add(t, "w3"), 200)
        t0 = time.monotonic()
        r = c.get("/v1/jobs/%s/w3/wait?timeout=0.5" % t)
        self.assertEqual(r.status, 204, r)
        self.assertGreaterEqual(time.monotonic() - t0, 0.45)

    def test_wait_returns_not_found_event_when_job_is_deleted(self):
        t, c = self.t, self.c
        self.assertStatus(c.add(t, "w4"), 200)
        th, out = in_thread(self.server.client().get, "/v1/jobs/%s/w4/wait?timeout=10" % t)
        time.sleep(0.3)
        self.assertStatus(c.delete("/v1/jobs/%s/w4" % t), 200)
        th.join(12)
        ev = self.assertStatus(out["value"], 200)
        self.assertEqual(ev, {"type": t, "id": "w4", "found": False})

    def finished_job(self, jid):
        t, c = self.t, self.c
        self.assertStatus(c.add(t, jid), 200)
        lock = self.assertStatus(c.accept(t), 200)["jobs"][0]["lock"]
        self.assertStatus(c.post("/v1/jobs/%s/%s/finish" % (t, jid), {"lock": lock}), 200)

    def wait_in_thread(self, jid, state):
        th, out = in_thread(self.server.client().get,
                            "/v1/jobs/%s/%s/wait?state=%s&timeout=10" % (self.t, jid, state))
        time.sleep(0.3)  # let the wait start (the point of these tests)
        self.assertTrue(th.is_alive(), "the wait answered before the job changed: %r" % out)
        return th, out

    def test_a_wait_begun_on_a_finished_job_answers_when_it_is_deleted(self):
        t, c = self.t, self.c
        self.finished_job("fd")
        th, out = self.wait_in_thread("fd", "running")
        self.assertStatus(c.delete("/v1/jobs/%s/fd" % t), 200)
        th.join(12)
        self.assertEqual(self.assertStatus(out["value"], 200), {"type": t, "id": "fd", "found": False})
        self.assertLess(out["elapsed"], 5.0, "it answered only at its timeout")

    def test_a_wait_begun_on_a_finished_job_answers_when_retention_removes_it(self):
        t, c = self.t, self.c
        self.assertStatus(c.put("/v1/types/%s" % t, {"timeout": 30, "finished_retention": 1}), 200)
        self.finished_job("fr")
        th, out = in_thread(self.server.client().get, "/v1/jobs/%s/fr/wait?state=pending&timeout=10" % t)
        th.join(12)
        self.assertEqual(self.assertStatus(out["value"], 200), {"type": t, "id": "fr", "found": False})
        self.assertLess(out["elapsed"], 8.0, "it answered only at its timeout")

    def test_a_wait_with_the_default_state_on_a_finished_job_answers_at_once(self):
        t, c = self.t, self.c
        self.finished_job("fo")
        t0 = time.monotonic()
        ev = self.assertStatus(c.get("/v1/jobs/%s/fo/wait?timeout=10" % t), 200)
        self.assertLess(time.monotonic() - t0, 2.0, "it followed the job instead")
        self.assertEqual((ev["found"], ev["state"], ev["outcome"]), (True, "finished", "succeeded"))

    def test_a_wait_begun_on_a_finished_job_follows_it_when_it_is_added_again(self):
        t, c = self.t, self.c
        self.finished_job("fa")
        th, out = self.wait_in_thread("fa", "running")
        self.assertStatus(c.add(t, "fa", {"run": 2}), 200)
        self.assertStatus(c.accept(t), 200)
        th.join(12)
        ev = self.assertStatus(out["value"], 200)
        self.assertEqual((ev["found"], ev["state"], ev["data"]), (True, "running", {"run": 2}), ev)
        self.assertLess(out["elapsed"], 5.0, "it answered only at its timeout")

    def test_a_following_event_stream_stays_open_across_finish_and_re_add_until_removal(self):
        t, c = self.t, self.c
        self.finished_job("ff")
        s = c.events("/v1/jobs/%s/ff/events?follow=true" % t, timeout=10)
        try:
            self.assertEqual(s.status, 200, s.body)
            self.assertEqual(s.next_event()[1]["state"], "finished")
            self.assertStatus(c.add(t, "ff", {"run": 2}), 200)
            name, ev = s.next_event()
            self.assertEqual((name, ev["state"], ev["data"]), ("job", "pending", {"run": 2}), ev)
            lock = self.assertStatus(c.accept(t), 200)["jobs"][0]["lock"]
            self.assertEqual(s.next_event()[1]["state"], "running")
            self.assertStatus(c.post("/v1/jobs/%s/ff/finish" % t, {"lock": lock}), 200)
            self.assertEqual(s.next_event()[1]["state"], "finished")
            self.assertStatus(c.delete("/v1/jobs/%s/ff" % t), 200)
            self.assertEqual(s.next_event(), ("job", {"type": t, "id": "ff", "found": False}))
            self.assertIsNone(s.next_event(), "stream did not close after found:false")
        finally:
            s.close()

    def test_an_event_stream_that_does_not_follow_closes_after_finished(self):
        t, c = self.t, self.c
        self.finished_job("fn")
        for query in ("", "?follow=false"):
            s = c.events("/v1/jobs/%s/fn/events%s" % (t, query), timeout=10)
            try:
                self.assertEqual(s.status, 200, s.body)
                self.assertEqual(s.next_event()[1]["state"], "finished")
                self.assertIsNone(s.next_event(), "stream did not close after finished")
            finally:
                s.close()
        r = c.get("/v1/jobs/%s/fn/events?follow=yes" % t)
        self.assertIn("follow", self.assertStatus(r, 400, "invalid_argument")["message"])

    def test_events_stream_shows_running_update_finished_then_closes(self):
        t, c = self.t, self.c
        self.assertStatus(c.add(t, "e1", {"step": 0}), 200)
        s = c.events("/v1/jobs/%s/e1/events" % t, timeout=10)
        try:
            self.assertEqual(s.status, 200, s.body)
            self.assertTrue(s.headers.get("content-type", "").startswith("text/event-stream"),
                            s.headers)
            name, ev = s.next_event()
            self.assertEqual(name, "job")
            self.assertEqual((ev["type"], ev["id"], ev["found"], ev["state"], ev["data"]),
                             (t, "e1", True, "pending", {"step": 0}))
            seq = ev["seq"]

            lock = self.assertStatus(c.accept(t), 200)["jobs"][0]["lock"]
            name, ev = s.next_event()
            self.assertEqual((name, ev["state"]), ("job", "running"), ev)
            self.assertGreater(ev["seq"], seq)
            seq = ev["seq"]

            self.assertStatus(c.post("/v1/jobs/%s/e1/update" % t,
                                     {"lock": lock, "data": {"step": 1}}), 200)
            name, ev = s.next_event()
            self.assertEqual((name, ev["state"], ev["data"]), ("job", "running", {"step": 1}), ev)
            self.assertGreater(ev["seq"], seq)

            self.assertStatus(c.post("/v1/jobs/%s/e1/finish" % t,
                                     {"lock": lock, "data": {"done": True}}), 200)
            name, ev = s.next_event()
            self.assertEqual((name, ev["state"], ev["data"]), ("job", "finished", {"done": True}), ev)
            self.assertIsNone(s.next_event(), "stream did not close after finished")
        finally:
            s.close()

    def test_events_stream_ends_with_found_false_when_job_is_deleted(self):
        t, c = self.t, self.c
        self.assertStatus(c.add(t, "e2"), 200)
        s = c.events("/v1/jobs/%s/e2/events" % t, timeout=10)
        try:
            self.assertEqual(s.status, 200, s.body)
            self.assertEqual(s.next_event()[1]["state"], "pending")
            self.assertStatus(c.delete("/v1/jobs/%s/e2" % t), 200)
            name, ev = s.next_event()
            self.assertEqual((name, ev), ("job", {"type": t, "id": "e2", "found": False}))
            self.assertIsNone(s.next_event(), "stream did not close after found:false")
        finally:
            s.close()

    def test_streams_and_long_polls_whose_client_has_already_left_are_closed(self):
        # The client sends its request and ends its side at once, so the server may see it gone
        # before the route has asked to hear of that; every connection must still be closed.
        c = self.c
        requests = ["GET /v1/workers/%s/events" % uniq("wt"),
                    "GET /v1/jobs/%s/gone/events" % self.t,
                    "GET /v1/jobs/%s/gone/wait?timeout=30" % self.t,
                    "POST /v1/accept/%s" % self.t]
        self.assertStatus(c.add(self.t, "gone"), 200)
        for attempt in range(15):
            for line in requests:
                with self.subTest(request=line, attempt=attempt):
                    sock = socket.create_connection((c.host, c.port), timeout=5)
                    try:
                        body = b'{"timeout": 30}' if line.startswith("POST") else b""
                        sock.sendall(line.encode() + b" HTTP/1.1\r\nHost: k\r\nContent-Length: %d"
                                     b"\r\n\r\n%s" % (len(body), body))
                        sock.shutdown(socket.SHUT_WR)
                        try:
                            chunk = sock.recv(65536)
                            while chunk:  # whatever the server answers, until it closes
                                chunk = sock.recv(65536)
                        except socket.timeout:
                            self.fail("the server kept the connection of a departed client open")
                    finally:
                        sock.close()


if __name__ == "__main__":
    unittest.main()
