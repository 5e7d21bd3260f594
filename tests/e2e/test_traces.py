"""Traces across the hop (issue 44 §3) and the attempt an accept answers with (§2): an add's
W3C traceparent, from its header or a field of the job, kept with the job and shown wherever
the job is; the request log's trace_id."""

import json
import unittest

from kvq_server import KvqServer, ServerTestCase, q, uniq, wait_until

TRACE_A = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
TRACE_B = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00"
INVALID = [
    "garbage",
    "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
    "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
    "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
    "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
    "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-",
]


class TracesTest(ServerTestCase):
    def new_type(self):
        t = uniq("tr")
        self.c.set_timeout(t, 60)
        return t

    def add(self, t, jid, traceparent_header=None, **fields):
        headers = {"traceparent": traceparent_header} if traceparent_header else None
        return self.c.post("/v1/jobs/%s" % q(t), dict(id=jid, **fields), headers=headers)

    def test_the_header_is_kept_with_the_job_and_shown_on_get_list_and_accept(self):
        t = self.new_type()
        self.assertStatus(self.add(t, "j", TRACE_A), 200)
        self.assertStatus(self.add(t, "plain", priority=1), 200)
        job = self.assertJobState(t, "j", "pending")
        self.assertEqual(job["traceparent"], TRACE_A)
        self.assertNotIn("traceparent", self.assertJobState(t, "plain", "pending"))
        page = self.assertStatus(self.c.get("/v1/jobs/%s" % q(t)), 200)
        shown = {j["id"]: j.get("traceparent") for j in page["jobs"]}
        self.assertEqual(shown, {"j": TRACE_A, "plain": None})
        taken = self.assertStatus(self.c.accept(t, timeout=5), 200)["jobs"][0]
        self.assertEqual((taken["id"], taken["traceparent"], taken["attempt"]), ("j", TRACE_A, 1))
        plain = self.assertStatus(self.c.accept(t, timeout=5), 200)["jobs"][0]
        self.assertEqual(plain["id"], "plain")
        self.assertNotIn("traceparent", plain)

    def test_the_header_applies_to_every_job_of_a_batch_and_a_field_wins(self):
        t = self.new_type()
        r = self.c.post("/v1/jobs/%s/batch" % q(t),
                        {"jobs": [{"id": "a"}, {"id": "b", "traceparent": TRACE_B},
                                  {"id": "c", "traceparent": None}]},
                        headers={"traceparent": TRACE_A})
        self.assertStatus(r, 200)
        for jid, want in (("a", TRACE_A), ("b", TRACE_B), ("c", TRACE_A)):
            self.assertEqual(self.assertJobState(t, jid, "pending")["traceparent"], want, jid)
        # The single add: the field wins over the header too.
        self.assertStatus(self.add(t, "d", TRACE_A, traceparent=TRACE_B), 200)
        self.assertEqual(self.assertJobState(t, "d", "pending")["traceparent"], TRACE_B)
        # A field alone.
        self.assertStatus(self.add(t, "e", traceparent=TRACE_B), 200)
        self.assertEqual(self.assertJobState(t, "e", "pending")["traceparent"], TRACE_B)

    def test_an_invalid_field_is_a_400_naming_it_and_adds_nothing(self):
        t = self.new_type()
        for bad in INVALID + [17]:
            r = self.add(t, "j", traceparent=bad)
            self.assertStatus(r, 400, "invalid_argument")
            self.assertIn("traceparent", r.json["message"], bad)
            r = self.c.post("/v1/jobs/%s/batch" % q(t),
                            {"jobs": [{"id": "ok"}, {"id": "j", "traceparent": bad}]})
            self.assertStatus(r, 400, "invalid_argument")
            self.assertIn("traceparent", r.json["message"], bad)
        self.assertStatus(self.c.job(t, "j"), 404, "not_found")
        self.assertStatus(self.c.job(t, "ok"), 404, "not_found")

    def test_an_invalid_header_is_ignored(self):
        t = self.new_type()
        for i, bad in enumerate(INVALID):
            jid = "j%d" % i
            self.assertStatus(self.add(t, jid, bad), 200)
            self.assertNotIn("traceparent", self.assertJobState(t, jid, "pending"), bad)
        r = self.c.post("/v1/jobs/%s/batch" % q(t), {"jobs": [{"id": "b"}]},
                        headers={"traceparent": INVALID[1]})
        self.assertStatus(r, 200)
        self.assertNotIn("traceparent", self.assertJobState(t, "b", "pending"))

    def test_events_and_a_finish_with_next_carry_it(self):
        t = self.new_type()
        self.assertStatus(self.add(t, "j", TRACE_A), 200)
        stream = self.c.events("/v1/jobs/%s/j/events" % q(t))
        self.addCleanup(stream.close)
        self.assertEqual(stream.status, 200)
        name, first = stream.next_event()
        self.assertEqual((name, first["state"], first["traceparent"]), ("job", "pending", TRACE_A))
        self.assertStatus(self.add(t, "k", TRACE_B), 200)
        taken = self.assertStatus(self.c.accept(t, timeout=5), 200)["jobs"][0]
        self.assertEqual(taken["id"], "j")
        _, running = stream.next_event()
        self.assertEqual((running["state"], running["traceparent"]), ("running", TRACE_A))
        r = self.c.post("/v1/jobs/%s/j/finish" % q(t), {"lock": taken["lock"], "next": {}})
        nxt = self.assertStatus(r, 200)["next"]
        self.assertEqual((nxt["id"], nxt["traceparent"], nxt["attempt"]), ("k", TRACE_B, 1))

    def test_the_accept_answer_says_which_attempt_the_run_is(self):
        t = self.new_type()
        self.assertStatus(self.c.put("/v1/types/%s" % q(t),
                                     {"backoff": {"base": 0.001, "cap": 0.001}}), 200)
        self.assertStatus(self.add(t, "j"), 200)
        seen = []
        for _ in range(3):
            taken = self.assertStatus(self.c.accept(t, timeout=5), 200)["jobs"][0]
            seen.append(taken["attempt"])
            r = self.c.post("/v1/jobs/%s/j/fail" % q(t),
                            {"lock": taken["lock"], "error": {"message": "again"}})
            self.assertStatus(r, 200)
        self.assertEqual(seen, [1, 2, 3])
        self.assertEqual(self.assertJobState(t, "j", "pending")["attempts"], 3)
        # A snoozed run is not an attempt: the next run is the 4th.
        taken = self.assertStatus(self.c.accept(t, timeout=5), 200)["jobs"][0]
        self.assertEqual(taken["attempt"], 4)
        self.assertStatus(self.c.post("/v1/jobs/%s/j/snooze" % q(t),
                                      {"lock": taken["lock"], "delay": 0}), 200)
        taken = self.assertStatus(self.c.accept(t, timeout=5), 200)["jobs"][0]
        self.assertEqual(taken["attempt"], 4)
        # Over POST /v1/accept as well.
        self.assertStatus(self.c.post("/v1/jobs/%s/j/finish" % q(t), {"lock": taken["lock"]}), 200)
        self.assertStatus(self.add(t, "j", data={"again": True}), 200)
        r = self.c.post("/v1/accept", {"types": [t], "timeout": 5}, timeout=20)
        self.assertEqual(self.assertStatus(r, 200)["jobs"][0]["attempt"], 1)


def log_of(server):
    server._stderr.seek(0)
    return server._stderr.read().decode(errors="replace")


class TraceLogTest(unittest.TestCase):
    def test_a_request_line_carries_the_trace_id_of_its_header(self):
        for fmt in ("text", "json"):
            with self.subTest(fmt=fmt):
                s = KvqServer(extra_args=["--log-format", fmt]).start()
                self.addCleanup(s.cleanup)
                c = s.client()
                t = uniq("trlog")
                c.set_timeout(t, 30)
                c.post("/v1/jobs/%s" % q(t), {"id": "traced"}, headers={"traceparent": TRACE_A})
                c.post("/v1/jobs/%s" % q(t), {"id": "bad"}, headers={"traceparent": INVALID[1]})
                c.get("/v1/jobs/%s/traced" % q(t), headers={"traceparent": TRACE_B})
                c.get("/v1/jobs/%s/bad" % q(t))
                want = 4
                lines = wait_until(
                    lambda: [l for l in log_of(s).splitlines() if "/v1/jobs/%s" % t in l
                             and "request" in l] if log_of(s).count("/v1/jobs/%s" % t) >= want
                    else None, 5, message="four request lines")
                self.assertEqual(len(lines), want, lines)
                if fmt == "json":
                    got = [json.loads(l).get("trace_id") for l in lines]
                else:
                    got = [l.split("trace_id=")[1] if "trace_id=" in l else None for l in lines]
                self.assertEqual(got, ["4bf92f3577b34da6a3ce929d0e0e4736", None,
                                       "0af7651916cd43dd8448eb211c80319c", None], lines)


if __name__ == "__main__":
    unittest.main()
