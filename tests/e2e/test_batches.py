"""Batches with a completion callback over HTTP and the CLI (issue 43): PUT /v1/batches/{id},
an add's "batch", POST /v1/batches/{id}/seal and GET /v1/batches/{id}; the callback added once
when the sealed batch's last member ends, with the counts by outcome and the dead members'
ids in its data; an empty batch firing at its seal; a cancelled member; "on": "success"
skipping the callback; each refusal (a missing or sealed batch, a missing callback type, bad
fields) as a 4xx naming the problem; kvq_batch_callbacks_total in /metrics; and `kvq batch
put/seal/get`, `kvq add --batch`. Every answer is checked against docs/openapi.yaml by the
client."""

import json
import re
import unittest

from kvq_server import ServerTestCase, q, uniq
from test_cli import key_values, run_kvq


def fired_total(metrics_text):
    m = re.search(r'^kvq_batch_callbacks_total\{result="fired"\} (\d+)$', metrics_text, re.M)
    return int(m.group(1)) if m else None


class BatchesTest(ServerTestCase):
    def setUp(self):
        super().setUp()
        self.t = uniq("bat")
        self.cb = uniq("batcb")
        self.c.set_timeout(self.t, 60)
        self.c.set_timeout(self.cb, 60)

    def put_batch(self, b, cid, **fields):
        body = {"callback": {"type": self.cb, "id": cid, "data": {"to": "ops"}}}
        body.update(fields)
        return self.c.put("/v1/batches/%s" % q(b), body)

    def seal(self, b):
        return self.c.post("/v1/batches/%s/seal" % q(b), {})

    def take(self, t, jid):
        r = self.c.post("/v1/accept/%s" % q(t), {"timeout": 5})
        job = self.assertStatus(r, 200)["jobs"][0]
        self.assertEqual(job["id"], jid)
        return job

    def end(self, jid, how="finish"):
        job = self.take(self.t, jid)
        path = "/v1/jobs/%s/%s/%s" % (q(self.t), q(jid), how)
        body = {"lock": job["lock"]}
        if how == "fail":
            body.update({"error": {"message": "no"}, "retry": False})
        self.assertStatus(self.c.post(path, body), 200)

    def test_the_callback_is_added_once_with_the_counts_when_the_sealed_batch_ends(self):
        b, cid = uniq("b"), uniq("cb")
        before = fired_total(self.c.get("/metrics").body.decode())
        self.assertIsNotNone(before, "no kvq_batch_callbacks_total in /metrics")
        put = self.assertStatus(self.put_batch(b, cid), 200)
        self.assertEqual(put["state"], "open")
        self.assertEqual(put["on"], "complete")
        self.assertFalse(put["sealed"])
        for jid in ("a", "d", "x"):
            self.assertStatus(self.c.add(self.t, jid, batch=b), 200)
        self.assertEqual(self.assertJobState(self.t, "a", "pending")["batch"], b)
        self.end("a")
        self.end("d", "fail")
        self.assertStatus(self.c.post("/v1/jobs/%s/x/cancel" % q(self.t), {}), 200)
        got = self.assertStatus(self.c.get("/v1/batches/%s" % q(b)), 200)
        self.assertEqual(got["counts"], {"members": 3, "unfinished": 0, "succeeded": 1, "dead": 1,
                                         "cancelled": 1})
        self.assertEqual(got["state"], "open")
        self.assertStatus(self.c.job(self.cb, cid), 404)  # unsealed: never fired
        sealed = self.assertStatus(self.seal(b), 200)
        self.assertEqual(sealed["state"], "fired")
        self.assertTrue(sealed["fired"])
        self.assertIsNotNone(sealed["settled_at"])
        cb = self.assertJobState(self.cb, cid, "pending")
        self.assertEqual(cb["data"]["to"], "ops")
        self.assertEqual(cb["data"]["batch"], {
            "id": b, "members": 3, "succeeded": 1, "dead": 1, "cancelled": 1,
            "dead_jobs": [{"type": self.t, "id": "d"}]})
        self.assertEqual(self.assertStatus(self.seal(b), 200)["state"], "fired")
        after = fired_total(self.c.get("/metrics").body.decode())
        self.assertEqual(after, before + 1)

    def test_a_one_member_batch_fires_at_its_end_and_an_empty_one_at_its_seal(self):
        one, empty = uniq("one"), uniq("empty")
        self.assertStatus(self.put_batch(one, "cb-" + one), 200)
        self.assertStatus(self.put_batch(empty, "cb-" + empty), 200)
        self.assertStatus(self.c.add(self.t, "m", batch=one), 200)
        self.assertEqual(self.assertStatus(self.seal(one), 200)["state"], "sealed")
        self.assertStatus(self.c.job(self.cb, "cb-" + one), 404)
        self.end("m")
        self.assertJobState(self.cb, "cb-" + one, "pending")
        self.assertEqual(self.assertStatus(self.seal(empty), 200)["state"], "fired")
        self.assertEqual(self.assertJobState(self.cb, "cb-" + empty, "pending")["data"]["batch"]
                         ["members"], 0)

    def test_on_success_skips_the_callback_when_a_member_fails(self):
        b, cid = uniq("b"), uniq("cb")
        self.assertStatus(self.put_batch(b, cid, on="success"), 200)
        self.assertStatus(self.c.add(self.t, "a", batch=b), 200)
        self.assertStatus(self.seal(b), 200)
        self.end("a", "fail")
        got = self.assertStatus(self.c.get("/v1/batches/%s" % q(b)), 200)
        self.assertEqual(got["state"], "skipped")
        self.assertFalse(got["fired"])
        self.assertStatus(self.c.job(self.cb, cid), 404)

    def test_refusals_name_the_problem(self):
        b = uniq("b")
        r = self.c.add(self.t, "a", batch="nope")
        self.assertStatus(r, 404, "not_found")
        self.assertIn("'nope'", r.json["message"])
        self.assertStatus(self.c.job(self.t, "a"), 404)
        self.assertStatus(self.c.get("/v1/batches/nope"), 404, "not_found")
        self.assertStatus(self.seal("nope"), 404, "not_found")
        r = self.c.put("/v1/batches/%s" % q(b), {"callback": {"type": "no-such-type", "id": "x"}})
        self.assertStatus(r, 404, "not_found")
        self.assertIn("no-such-type", r.json["message"])
        self.assertStatus(self.c.put("/v1/batches/%s" % q(b), {}), 400, "invalid_argument")
        self.assertStatus(self.c.put("/v1/batches/%s" % q(b), {"callback": {"type": self.cb}}),
                          400, "invalid_argument")
        self.assertStatus(self.c.put("/v1/batches/%s" % q(b),
                                     {"callback": {"type": self.cb, "id": "x", "when": 1}}),
                          400, "unknown_field")
        r = self.put_batch(b, "x", on="sometimes")
        self.assertStatus(r, 400, "invalid_argument")
        self.assertIn("'on'", r.json["message"])
        self.assertStatus(self.c.add(self.t, "a", batch=""), 400, "invalid_argument")
        self.assertStatus(self.put_batch(b, "x"), 200)
        self.assertStatus(self.seal(b), 200)
        r = self.c.add(self.t, "late", batch=b)
        self.assertStatus(r, 409, "wrong_state")
        self.assertIn("sealed", r.json["message"])
        r = self.c.post("/v1/jobs/%s/batch" % q(self.t), {"jobs": [{"id": "late2", "batch": b}]})
        self.assertStatus(r, 409, "wrong_state")
        self.assertStatus(self.put_batch(b, "other"), 409, "wrong_state")


class BatchesCliTest(ServerTestCase):
    def kvq(self, *args, **kw):
        return run_kvq(*args, url=self.server.url, **kw)

    def test_batch_put_add_seal_get(self):
        t, cb, b = uniq("batcli"), uniq("batclicb"), uniq("b")
        self.c.set_timeout(t, 60)
        self.c.set_timeout(cb, 60)
        put = self.kvq("batch", "put", b, "--callback-type", cb, "--callback-id", "done",
                       "--data", '{"k": 1}', "--on", "complete")
        self.assertEqual(put.returncode, 0, put.stderr)
        self.assertEqual(key_values(put.stdout)["state"], "open")
        added = self.kvq("add", t, "m1", "--batch", b)
        self.assertEqual(added.returncode, 0, added.stderr)
        sealed = self.kvq("batch", "seal", b)
        self.assertEqual(sealed.returncode, 0, sealed.stderr)
        shown = key_values(sealed.stdout)
        self.assertEqual(shown["state"], "sealed")
        self.assertEqual(shown["members"], "1")
        self.assertEqual(shown["unfinished"], "1")
        self.assertEqual(self.kvq("cancel", t, "m1").returncode, 0)
        got = self.kvq("batch", "get", b)
        self.assertEqual(got.returncode, 0, got.stderr)
        shown = key_values(got.stdout)
        self.assertEqual(shown["state"], "fired")
        self.assertEqual(shown["cancelled"], "1")
        as_json = self.kvq("batch", "get", b, "--json")
        self.assertEqual(json.loads(as_json.stdout)["counts"]["cancelled"], 1)
        self.assertJobState(cb, "done", "pending")
        # Bad input: a clear message and a non-zero exit.
        late = self.kvq("add", t, "m2", "--batch", b)
        self.assertNotEqual(late.returncode, 0)
        self.assertIn("sealed", late.stderr)
        missing = self.kvq("batch", "put", b)
        self.assertNotEqual(missing.returncode, 0)
        self.assertIn("--callback-type", missing.stderr)
        bad_on = self.kvq("batch", "put", b, "--callback-type", cb, "--callback-id", "x",
                          "--on", "never")
        self.assertNotEqual(bad_on.returncode, 0)
        self.assertIn("complete or success", bad_on.stderr)
        nope = self.kvq("batch", "get", uniq("nope"))
        self.assertNotEqual(nope.returncode, 0)
        self.assertIn("not_found", nope.stderr)
        sub = self.kvq("batch", "frobnicate")
        self.assertNotEqual(sub.returncode, 0)
        self.assertIn("usage: kvq batch put", sub.stderr)
        none = self.kvq("batch")
        self.assertNotEqual(none.returncode, 0)
        self.assertIn("put, seal or get", none.stderr)


if __name__ == "__main__":
    unittest.main()
