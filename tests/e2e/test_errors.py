"""Named errors (and that a failed request changes nothing), auth, and /metrics."""

import http.client
import json
import re
import socket
import time
import unittest

from kvq_server import ServerTestCase, q, uniq


class NamedErrors(ServerTestCase):

    def setUp(self):
        super().setUp()
        self.t = uniq("err")
        self.c.set_timeout(self.t, 30)
        self.assertStatus(self.c.add(self.t, "keep", {"orig": True}), 200)
        self.snapshot = self.state()

    def state(self):
        """Everything the error requests below could touch."""
        c, t = self.c, self.t
        jobs = self.assertStatus(c.get("/v1/jobs/%s?limit=1000" % t), 200)["jobs"]
        typ = c.get("/v1/types/%s" % t)
        return {"jobs": [(j["id"], j["state"], j["data"], j["updated_at"]) for j in jobs],
                "type": (typ.status, typ.body)}

    def assertUnchanged(self):
        self.assertEqual(self.state(), self.snapshot, "a failed request changed the store")

    def test_malformed_json_body(self):
        p = "/v1/jobs/%s" % self.t
        for raw in ('{"id": "x", "data": {}', "not json", '{"id": "x",}', "{} {}"):
            with self.subTest(body=raw):
                self.assertStatus(self.c.post(p, raw=raw), 400, "malformed_json")
        self.assertUnchanged()

    def test_json_array_body_is_malformed(self):
        p = "/v1/jobs/%s" % self.t
        self.assertStatus(self.c.post(p, raw='[{"id": "x", "data": {}}]'), 400, "malformed_json")
        self.assertStatus(self.c.post(p, raw='"a string"'), 400, "malformed_json")
        self.assertStatus(self.c.put("/v1/types/%s" % self.t, raw="[30]"), 400, "malformed_json")
        self.assertUnchanged()

    def test_json_nested_deeper_than_64_levels_is_rejected(self):
        deep = "[" * 100 + "]" * 100
        r = self.c.post("/v1/jobs/%s" % self.t, raw='{"id": "deep", "data": {"x": %s}}' % deep)
        self.assertEqual(r.status, 400, r)
        self.assertIn(r.error, ("malformed_json", "invalid_argument"), r)
        self.assertUnchanged()

    def test_invalid_argument_for_bad_ids_data_and_timeouts(self):
        c, t = self.c, self.t
        cases = {
            "empty id": lambda: c.post("/v1/jobs/%s" % t, {"id": "", "data": {}}),
            "257-byte id": lambda: c.post("/v1/jobs/%s" % t, {"id": "x" * 257, "data": {}}),
            "control char id": lambda: c.post("/v1/jobs/%s" % t, {"id": "a\nb", "data": {}}),
            "id not a string": lambda: c.post("/v1/jobs/%s" % t, {"id": 7, "data": {}}),
            "missing id": lambda: c.post("/v1/jobs/%s" % t, {"data": {}}),
            "data a string": lambda: c.post("/v1/jobs/%s" % t, {"id": "x", "data": "s"}),
            "data an array": lambda: c.post("/v1/jobs/%s" % t, {"id": "x", "data": [1]}),
            "data over 256 KiB": lambda: c.post("/v1/jobs/%s" % t,
                                                {"id": "x", "data": {"s": "a" * 300000}}),
            "priority a string": lambda: c.post("/v1/jobs/%s" % t,
                                                {"id": "x", "data": {}, "priority": "high"}),
            "negative type timeout": lambda: c.put("/v1/types/%s" % t, {"timeout": -1}),
            "zero type timeout": lambda: c.put("/v1/types/%s" % t, {"timeout": 0}),
            "type timeout a string": lambda: c.put("/v1/types/%s" % t, {"timeout": "30"}),
            "zero finished_retention": lambda: c.put("/v1/types/%s" % t,
                                                     {"timeout": 30, "finished_retention": 0}),
            "negative finished_retention": lambda: c.put("/v1/types/%s" % t,
                                                         {"timeout": 30, "finished_retention": -5}),
            "finished_retention a string": lambda: c.put("/v1/types/%s" % t,
                                                         {"timeout": 30, "finished_retention": "1d"}),
            "finished_retention over 10 years": lambda: c.put(
                "/v1/types/%s" % t, {"timeout": 30, "finished_retention": 400000000}),
            "negative accept timeout": lambda: c.post("/v1/accept/%s" % t, {"timeout": -1}),
            "accept timeout over 300": lambda: c.post("/v1/accept/%s" % t, {"timeout": 301}),
            "accept count 0": lambda: c.post("/v1/accept/%s" % t, {"count": 0}),
            "accept count 101": lambda: c.post("/v1/accept/%s" % t, {"count": 101}),
            "bad type name (space)": lambda: c.post("/v1/jobs/%s" % q("bad type"),
                                                    {"id": "x", "data": {}}),
            "201-byte type name": lambda: c.put("/v1/types/%s" % ("t" * 201), {"timeout": 1}),
            "list limit 0": lambda: c.get("/v1/jobs/%s?limit=0" % t),
            "list limit 10001": lambda: c.get("/v1/jobs/%s?limit=10001" % t),
            "health_timeout below 0.1": lambda: c.post("/v1/workers/%s" % uniq("wt"),
                                                       {"id": "w", "health_timeout": 0.05}),
            "update without lock": lambda: c.post("/v1/jobs/%s/keep/update" % t, {}),
        }
        for name, call in cases.items():
            with self.subTest(case=name):
                self.assertStatus(call(), 400, "invalid_argument")
        self.assertUnchanged()
        self.assertStatus(c.get("/v1/types/%s" % ("t" * 201)), 400, "invalid_argument")

    def test_unknown_field(self):
        c, t = self.c, self.t
        self.assertStatus(c.post("/v1/jobs/%s" % t, {"id": "x", "data": {}, "bogus": 1}),
                          400, "unknown_field")
        self.assertStatus(c.put("/v1/types/%s" % t, {"timeout": 5, "timeuot": 1}),
                          400, "unknown_field")
        self.assertStatus(c.post("/v1/accept/%s" % t, {"timout": 5}), 400, "unknown_field")
        self.assertStatus(c.post("/v1/jobs/%s/batch" % t,
                                 {"jobs": [{"id": "x", "data": {}, "prio": 1}]}),
                          400, "unknown_field")
        self.assertUnchanged()

    def test_not_found(self):
        c, t = self.c, self.t
        missing_t = uniq("missing")
        self.assertStatus(c.get("/v1/jobs/%s/nope" % t), 404, "not_found")
        self.assertStatus(c.delete("/v1/jobs/%s/nope" % t), 404, "not_found")
        self.assertStatus(c.get("/v1/types/%s" % missing_t), 404, "not_found")
        self.assertStatus(c.delete("/v1/types/%s" % missing_t), 404, "not_found")
        self.assertStatus(c.get("/v1/jobs/%s/nope/wait?timeout=1" % t), 404, "not_found")
        s = c.events("/v1/jobs/%s/nope/events" % t)
        try:
            self.assertEqual(s.status, 404, s.body)
            self.assertEqual(json.loads(s.body)["error"], "not_found")
        finally:
            s.close()
        self.assertUnchanged()

    def test_no_route(self):
        for path in ("/nope", "/v1/nope", "/v1/jobs", "/v2/types", "/v1/types/a/b/c"):
            with self.subTest(path=path):
                self.assertStatus(self.c.get(path), 404, "no_route")
        self.assertUnchanged()

    def test_method_not_allowed(self):
        c, t = self.c, self.t
        cases = [("GET", "/v1/accept/%s" % t), ("PATCH", "/v1/types/%s" % t),
                 ("POST", "/v1/types/%s" % t), ("PUT", "/v1/jobs/%s/keep" % t),
                 ("DELETE", "/v1/types"), ("POST", "/healthz"),
                 ("GET", "/v1/jobs/%s/keep/finish" % t)]
        for method, path in cases:
            with self.subTest(method=method, path=path):
                self.assertStatus(c.request(method, path), 405, "method_not_allowed")
        self.assertUnchanged()

    def test_halted_for_a_lock_not_held(self):
        c, t = self.c, self.t
        # a real lock, but of another job of the type
        self.assertStatus(c.add(t, "other"), 200)
        acc = self.assertStatus(c.accept(t, count=2), 200)["jobs"]
        locks = {j["id"]: j["lock"] for j in acc}
        self.assertEqual(set(locks), {"keep", "other"})
        self.assertStatus(c.post("/v1/jobs/%s/other/finish" % t, {"lock": locks["other"]}), 200)
        self.snapshot = self.state()
        for op in ("update", "finish", "resubmit"):
            with self.subTest(op=op):
                r = c.post("/v1/jobs/%s/keep/%s" % (t, op), {"lock": locks["other"]})
                self.assertStatus(r, 409, "halted")
        self.assertUnchanged()
        # a stale lock of the same job: it was re-added after it finished, and accepted again
        self.assertStatus(c.post("/v1/jobs/%s/keep/finish" % t, {"lock": locks["keep"]}), 200)
        self.assertStatus(c.add(t, "keep", {"orig": True}), 200)
        new_lock = self.assertStatus(c.accept(t), 200)["jobs"][0]["lock"]
        self.snapshot = self.state()
        self.assertStatus(c.post("/v1/jobs/%s/keep/update" % t, {"lock": locks["keep"]}),
                          409, "halted")
        self.assertStatus(c.post("/v1/jobs/%s/keep/finish" % t, {"lock": locks["keep"]}),
                          409, "halted")
        self.assertUnchanged()
        self.assertStatus(c.post("/v1/jobs/%s/keep/finish" % t, {"lock": new_lock}), 200)

    def test_made_up_lock_is_rejected_and_changes_nothing(self):
        # Not named by the doc: a lock that was never issued. 409 halted or 400
        # invalid_argument are both reasonable; nothing may change.
        c, t = self.c, self.t
        for op in ("update", "finish", "resubmit"):
            with self.subTest(op=op):
                r = c.post("/v1/jobs/%s/keep/%s" % (t, op), {"lock": "made-up"})
                self.assertIn((r.status, r.error), [(409, "halted"), (400, "invalid_argument")], r)
        self.assertUnchanged()

    def test_no_timeout(self):
        c, t = self.c, uniq("notimeout")
        self.assertStatus(c.add(t, "x"), 409, "no_timeout")
        self.assertStatus(c.post("/v1/jobs/%s/batch" % t, {"jobs": [{"id": "x", "data": {}}]}),
                          409, "no_timeout")
        self.assertStatus(c.job(t, "x"), 404, "not_found")
        self.assertStatus(c.get("/v1/types/%s" % t), 404, "not_found")
        self.assertUnchanged()

    def test_already_exists(self):
        c, wt = self.c, uniq("wt")
        tok = self.assertStatus(c.post("/v1/workers/%s" % wt, {"id": "w", "info": {"n": 1}}),
                                200)["token"]
        r = c.post("/v1/workers/%s" % wt, {"id": "w", "info": {"n": 2}})
        self.assertStatus(r, 409, "already_exists")
        workers = self.assertStatus(c.get("/v1/workers/%s" % wt), 200)["workers"]
        self.assertEqual([(w["id"], w["info"]) for w in workers], [("w", {"n": 1})])
        self.assertStatus(c.post("/v1/workers/%s/w/heartbeat" % wt, {"token": tok}), 200)
        self.assertUnchanged()

    def test_accept_records_a_worker_name_that_need_not_be_registered(self):
        # docs/http-api.md: "worker" is a free-form name; registration only adds rescue.
        c, t = self.c, self.t
        name = uniq("ghost")
        r = c.accept(t, worker=name)
        self.assertEqual(r.status, 200, r)
        job = r.json["jobs"][0]
        info = c.job(t, job["id"])
        self.assertEqual(info.status, 200, info)
        self.assertEqual(info.json["state"], "running")
        self.assertEqual(info.json["worker"], name)


class BodyLimit(ServerTestCase):
    server_kwargs = {"max_body": 1024}

    def test_body_larger_than_max_body_is_413(self):
        c, t = self.c, uniq("big")
        c.set_timeout(t, 30)
        body = json.dumps({"id": "big", "data": {"s": "a" * 2000}}).encode()
        r = c.raw_request("POST", "/v1/jobs/%s" % t, body)
        self.assertStatus(r, 413, "body_too_large")
        self.assertStatus(c.job(t, "big"), 404, "not_found")
        # just under the limit is fine
        r = c.post("/v1/jobs/%s" % t, {"id": "small", "data": {"s": "a" * 900}})
        self.assertStatus(r, 200)
        # and the server is still healthy afterwards
        self.assertStatus(c.get("/healthz"), 200)

    def test_much_larger_body_is_413_too(self):
        c, t = self.c, uniq("big")
        c.set_timeout(t, 30)
        body = json.dumps({"id": "huge", "data": {"s": "a" * 2_000_000}}).encode()
        r = c.raw_request("POST", "/v1/jobs/%s" % t, body)
        self.assertStatus(r, 413, "body_too_large")
        self.assertStatus(c.job(t, "huge"), 404, "not_found")


class Auth(ServerTestCase):
    server_kwargs = {"token": "s3cret"}

    def test_healthz_needs_no_token_and_names_the_store_only_to_a_caller_with_it(self):
        anyone = self.server.client(token=None).get("/healthz")
        self.assertStatus(anyone, 200)
        self.assertEqual(anyone.json, {"status": "ok"})
        wrong = self.server.client(token="s3cre").get("/healthz")
        self.assertEqual(wrong.json, {"status": "ok"})
        told = self.server.client().get("/healthz")
        self.assertStatus(told, 200)
        self.assertIn(self.server.data_dir, told.json["store"])

    def test_missing_or_wrong_token_is_401_and_changes_nothing(self):
        t = uniq("auth")
        ok = self.server.client()
        none = self.server.client(token=None)
        wrong = self.server.client(token="s3cre")
        for name, cl in (("no token", none), ("wrong token", wrong)):
            with self.subTest(client=name):
                self.assertStatus(cl.get("/v1/types"), 401, "unauthorized")
                self.assertStatus(cl.put("/v1/types/%s" % t, {"timeout": 5}), 401, "unauthorized")
                self.assertStatus(cl.get("/metrics"), 401, "unauthorized")
        self.assertStatus(ok.get("/v1/types/%s" % t), 404, "not_found")
        r = none.request("GET", "/v1/types", headers={"Authorization": "Basic czNjcmV0"})
        self.assertStatus(r, 401, "unauthorized")
        r = none.request("GET", "/v1/types", headers={"Authorization": "s3cret"})
        self.assertStatus(r, 401, "unauthorized")

    def test_right_token_succeeds(self):
        t, ok = uniq("auth"), self.server.client()
        self.assertStatus(ok.put("/v1/types/%s" % t, {"timeout": 5}), 200)
        self.assertStatus(ok.add(t, "a"), 200)
        self.assertStatus(self.server.client(token=None).add(t, "b"), 401, "unauthorized")
        self.assertStatus(ok.job(t, "b"), 404, "not_found")
        self.assertEqual(self.assertStatus(ok.accept(t), 200)["jobs"][0]["id"], "a")


SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$')
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def parse_prometheus(text):
    """[(name, {labels}, float value)]; raises on a line that is not valid."""
    samples, types = [], {}
    for line in text.splitlines():
        if not line:
            continue
        if line.startswith("#"):
            parts = line.split()
            if len(parts) >= 4 and parts[1] == "TYPE":
                types[parts[2]] = parts[3]
            continue
        m = SAMPLE.match(line)
        if not m:
            raise AssertionError("not a Prometheus sample line: %r" % line)
        labels = dict(LABEL.findall(m.group(2) or ""))
        samples.append((m.group(1), labels, float(m.group(3))))
    return samples, types


class Metrics(ServerTestCase):

    def test_metrics_in_prometheus_text_format(self):
        c, t = self.c, uniq("met")
        c.set_timeout(t, 30)
        for i in range(3):
            self.assertStatus(c.add(t, "m%d" % i), 200)
        self.assertStatus(c.accept(t), 200)
        done = self.assertStatus(c.accept(t), 200)["jobs"][0]
        self.assertStatus(c.post("/v1/jobs/%s/%s/finish" % (t, done["id"]), {"lock": done["lock"]}), 200)
        self.assertStatus(c.get("/v1/nope"), 404)
        r = c.get("/metrics")
        self.assertEqual(r.status, 200, r)
        self.assertTrue(r.headers.get("content-type", "").startswith("text/plain"), r.headers)
        samples, types = parse_prometheus(r.body.decode())
        self.assertEqual(types.get("kvq_jobs"), "gauge", types)
        self.assertEqual(types.get("kvq_http_requests_total"), "counter", types)

        def value(name, **labels):
            vals = [v for n, l, v in samples if n == name
                    and all(l.get(k) == x for k, x in labels.items())]
            return vals
        self.assertEqual(value("kvq_jobs", type=t, state="pending"), [1.0])
        self.assertEqual(value("kvq_jobs", type=t, state="running"), [1.0])
        self.assertEqual(value("kvq_jobs", type=t, state="finished"), [1.0])
        self.assertEqual(types.get("kvq_retention_removals_total"), "counter", types)
        reqs = [(l, v) for n, l, v in samples if n == "kvq_http_requests_total"]
        self.assertTrue(reqs, "no kvq_http_requests_total samples")
        self.assertTrue(all("route" in l and "status" in l for l, _ in reqs), reqs)
        self.assertTrue(any(l["status"] == "200" and v >= 1 for l, v in reqs), reqs)
        self.assertTrue(any(l["status"] == "404" and v >= 1 for l, v in reqs), reqs)
        self.assertTrue(value("kvq_accepts_total", type=t), "no kvq_accepts_total for the type")

    def test_request_durations_by_route_include_a_long_polls_wait(self):
        c, t = self.c, uniq("dur")
        c.set_timeout(t, 30)
        self.assertStatus(c.add(t, "d0"), 200)
        self.assertStatus(c.accept(t), 200)
        started = time.monotonic()
        self.assertStatus(c.accept(t, timeout=1), 204)  # nothing due: waits its second
        waited = time.monotonic() - started
        samples, types = parse_prometheus(self.c.get("/metrics").body.decode())
        name = "kvq_http_request_duration_seconds"
        self.assertEqual(types.get(name), "histogram", types)
        route = "/v1/accept/{type}"
        buckets = sorted((float(l["le"]), v) for n, l, v in samples
                         if n == name + "_bucket" and l.get("route") == route)
        count = [v for n, l, v in samples if n == name + "_count" and l.get("route") == route]
        total = [v for n, l, v in samples if n == name + "_sum" and l.get("route") == route]
        self.assertEqual(len(count), 1, samples)
        self.assertGreaterEqual(count[0], 2)
        self.assertEqual(buckets[-1], (float("inf"), count[0]), buckets)
        counts = [v for _, v in buckets]
        self.assertEqual(counts, sorted(counts), "buckets must be cumulative")
        # The wait of about a second is in the sum and above the 0.5-s bucket; the quick accept
        # is below it.
        self.assertGreaterEqual(total[0], 0.9 * min(waited, 1.0))
        below_half = dict(buckets)[0.5]
        self.assertGreaterEqual(below_half, 1)
        self.assertLess(below_half, count[0])
        # Every route that answered has its histogram, the add's too.
        self.assertTrue([v for n, l, v in samples if n == name + "_count"
                         and l.get("route") == "/v1/jobs/{type}" and v >= 1], samples)


def exchange(server, raw, timeout=10):
    """Sends `raw` bytes on a fresh connection and half-closes nothing: returns
    (status, headers, body bytes, closed) where `closed` says the server ended the
    connection after its answer. Raises if no whole response arrives."""
    host, port = server.url.split("//")[1].rsplit(":", 1)
    sock = socket.create_connection((host, int(port)), timeout=timeout)
    try:
        try:
            sock.sendall(raw)
        except OSError:
            pass  # the server may answer and stop reading first
        r = http.client.HTTPResponse(sock)
        r.begin()
        body = r.read()
        headers = {k.lower(): v for k, v in r.getheaders()}
        # After the answer the server closes: a read sees the end within the timeout.
        try:
            rest = sock.recv(1)
            closed = rest == b""
        except ConnectionResetError:
            closed = True
        except socket.timeout:
            closed = False
        return r.status, headers, body, closed
    finally:
        sock.close()


class MalformedHttp(ServerTestCase):
    """Requests Beast cannot frame, or that break the limits, get a status and a JSON
    error body, then the connection closes (docs/http-api.md, "Malformed requests")."""

    def check(self, raw, status, error):
        got, headers, body, closed = exchange(self.server, raw)
        self.assertEqual(got, status, (raw[:80], body))
        doc = json.loads(body)
        self.assertEqual(doc.get("error"), error, doc)
        self.assertIsInstance(doc.get("message"), str, doc)
        self.assertEqual(headers.get("connection"), "close", headers)
        self.assertTrue(closed, "the connection stayed open after %r" % raw[:80])

    def request(self, head_lines, body=b""):
        head = "\r\n".join(head_lines) + "\r\n\r\n"
        return head.encode() + body

    def test_bad_content_length_is_400(self):
        for value in ["-1", "0x10", "18446744073709551616", "1 2", "abc"]:
            with self.subTest(content_length=value):
                self.check(self.request(["POST /v1/jobs/t HTTP/1.1", "Host: x",
                                         "Content-Length: " + value]), 400, "bad_request")

    def test_bad_chunk_is_400(self):
        raw = self.request(["POST /v1/jobs/t HTTP/1.1", "Host: x", "Transfer-Encoding: chunked"]) + \
            b"zz\r\n{}\r\n0\r\n\r\n"
        self.check(raw, 400, "bad_request")

    def test_nul_in_a_header_is_400(self):
        self.check(b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-A: a\x00b\r\n\r\n", 400, "bad_request")

    def test_target_not_starting_with_slash_is_400(self):
        self.check(self.request(["GET Xv1/types HTTP/1.1", "Host: x"]), 400, "bad_request")
        self.check(self.request(["GET http://x/v1/types HTTP/1.1", "Host: x"]), 400, "bad_request")

    def test_body_over_the_limit_is_413_before_it_is_sent(self):
        # Only the header: the 413 comes from the declared length alone.
        self.check(self.request(["POST /v1/jobs/t HTTP/1.1", "Host: x", "Content-Length: 999999999"]),
                   413, "body_too_large")

    def test_a_body_on_a_public_route_is_413(self):
        # Public routes need no token: a body there is refused unread, not held.
        self.check(self.request(["GET /healthz HTTP/1.1", "Host: x", "Content-Length: 100000"]),
                   413, "body_too_large")

    def test_long_target_is_414(self):
        self.check(self.request(["GET /" + "a" * 9000 + " HTTP/1.1", "Host: x"]), 414, "target_too_long")
        # Longer than the whole header limit: the request line never ends within it.
        self.check(self.request(["GET /" + "a" * 20000 + " HTTP/1.1", "Host: x"]), 414, "target_too_long")

    def test_large_header_is_431(self):
        self.check(self.request(["GET /healthz HTTP/1.1", "Host: x", "X-Big: " + "b" * 17000]),
                   431, "header_too_large")

    def test_other_versions_are_505(self):
        self.check(self.request(["GET /healthz HTTP/2.0", "Host: x"]), 505, "http_version_not_supported")
        self.check(self.request(["GET /healthz HTTP/1.2", "Host: x"]), 505, "http_version_not_supported")

    def test_http_0_9_request_line_is_answered(self):
        # No version at all: answered in HTTP/1.1 (which an HTTP/0.9 client shows as text).
        self.check(b"GET /healthz\r\n\r\n", 400, "bad_request")

    def test_transfer_codings_other_than_chunked_are_501(self):
        for coding in ["xchunked", "identity", "gzip"]:
            with self.subTest(coding=coding):
                raw = self.request(["POST /v1/jobs/t HTTP/1.1", "Host: x", "Transfer-Encoding: " + coding,
                                    "Content-Length: 2"], b"{}")
                self.check(raw, 501, "not_implemented")
        raw = self.request(["POST /v1/jobs/t HTTP/1.1", "Host: x", "Transfer-Encoding: gzip, chunked"],
                           b"2\r\n{}\r\n0\r\n\r\n")
        self.check(raw, 501, "not_implemented")

    def test_chunked_with_content_length_is_400(self):
        raw = self.request(["POST /v1/jobs/t HTTP/1.1", "Host: x", "Transfer-Encoding: chunked",
                            "Content-Length: 7"], b"2\r\n{}\r\n0\r\n\r\n")
        self.check(raw, 400, "bad_request")

    def test_chunked_body_is_still_served(self):
        t = uniq("chunk")
        self.assertStatus(self.c.set_timeout(t, 30), 200)
        body = json.dumps({"id": "j1"}).encode()
        raw = self.request(["POST /v1/jobs/%s HTTP/1.1" % t, "Host: x", "Transfer-Encoding: chunked",
                            "Connection: close"], b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body))
        got, _, reply, _ = exchange(self.server, raw)
        self.assertEqual(got, 200, reply)
        self.assertJobState(t, "j1", "pending")


class NumberRanges(ServerTestCase):
    """Every number a request carries has a range (docs/http-api.md); outside it the
    answer is 400 naming the field, never a wrapped value."""

    def setUp(self):
        super().setUp()
        self.t = uniq("num")
        self.assertStatus(self.c.set_timeout(self.t, 30), 200)

    def test_integers_beyond_the_range_are_400_not_wrapped(self):
        big = 18446744073709551615
        for field in ["priority", "scheduled_time"]:
            for value in [big, 9223372036854775807, 2 ** 53, -(2 ** 53), 1.5, 1e300]:
                with self.subTest(field=field, value=value):
                    r = self.c.post("/v1/jobs/%s" % self.t, {"id": uniq("j"), field: value})
                    self.assertStatus(r, 400, "invalid_argument")
                    self.assertIn(field, r.json["message"])
        raw = '{"id": "w", "priority": 18446744073709551615, "scheduled_time": 18446744073709551615}'
        self.assertStatus(self.c.post("/v1/jobs/%s" % self.t, raw=raw), 400, "invalid_argument")
        self.assertEqual(self.c.get("/v1/jobs/%s/w" % self.t).status, 404)
        # The bounds themselves are accepted.
        for value in [2 ** 53 - 1, -(2 ** 53 - 1)]:
            self.assertStatus(self.c.post("/v1/jobs/%s" % self.t, {"id": uniq("j"), "priority": value}), 200)

    def test_accept_fields_have_ranges(self):
        for body in [{"count": 0}, {"count": 101}, {"count": 18446744073709551615},
                     {"max_priority": 2 ** 63}, {"max_scheduled_time": 18446744073709551615},
                     {"timeout": 301}, {"timeout": -1}]:
            with self.subTest(body=body):
                r = self.c.post("/v1/accept/%s" % self.t, body)
                self.assertStatus(r, 400, "invalid_argument")
                self.assertIn(next(iter(body)), r.json["message"])

    def test_query_numbers_have_ranges(self):
        for path in ["/v1/types/%s/pending?max_scheduled_time=9223372036854775807",
                     "/v1/types/%s/pending?max_scheduled_time=1e300",
                     "/v1/jobs/%s?limit=0", "/v1/jobs/%s?limit=10001", "/v1/jobs/%s?limit=1.5",
                     "/v1/jobs/%s?limit=18446744073709551616"]:
            with self.subTest(path=path):
                r = self.c.get(path % self.t)
                self.assertStatus(r, 400, "invalid_argument")
                self.assertIn(path.split("?")[1].split("=")[0], r.json["message"])

    def test_trailing_nul_after_json_is_malformed(self):
        r = self.c.post("/v1/jobs/%s" % self.t, raw=b'{"id": "n"}\x00')
        self.assertStatus(r, 400, "malformed_json")
        self.assertEqual(self.c.get("/v1/jobs/%s/n" % self.t).status, 404)


if __name__ == "__main__":
    unittest.main()
