# SPDX-License-Identifier: Apache-2.0
"""Traces across the hop: a job's traceparent, from its add to its handler, against a real
kvq serve; and the OpenTelemetry path, with a small fake of the ``opentelemetry`` API module
put in sys.modules (the API is not installed here, and the test must see what kvq asks of it:
a real SDK would need an exporter to read the spans back)."""

import contextlib
import contextvars
import http.client
import http.server
import importlib.util
import sys
import threading
import types
import unittest

from support import ServerTest, kvq, uniq
from kvq import _otel

PARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
AMBIENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


class RecordingProxy:
    """Forwards each request to the server and keeps its headers: what a client sent."""

    def __init__(self, target_url):
        target = target_url.split("//", 1)[1]
        seen = self.seen = []

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                seen.append((self.path, {k.lower(): v for k, v in self.headers.items()}))
                conn = http.client.HTTPConnection(target, timeout=10)
                headers = {k: v for k, v in self.headers.items() if k.lower() != "host"}
                conn.request("POST", self.path, body=body, headers=headers)
                resp = conn.getresponse()
                data = resp.read()
                self.send_response(resp.status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
                conn.close()

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = "http://127.0.0.1:%d" % self.httpd.server_address[1]
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


class FakeOtel:
    """The part of the OpenTelemetry API kvq uses: propagate.inject/extract, trace.get_tracer
    and start_as_current_span, SpanKind, Status, StatusCode. Spans are kept in ``spans``."""

    def __init__(self):
        self.current = contextvars.ContextVar("fake_otel_span", default=None)
        self.spans = []
        fake = self

        class Span:
            def __init__(self, name, parent, kind, attributes):
                self.name, self.parent, self.kind = name, parent, kind
                self.attributes = dict(attributes or {})
                self.status, self.exceptions = None, []
                # A child keeps the trace id of its parent, as W3C says.
                trace_id = parent.split("-")[1] if parent else "1" * 32
                self.traceparent = "00-%s-%016x-01" % (trace_id, len(fake.spans) + 1)

            def set_attribute(self, key, value):
                self.attributes[key] = value

            def record_exception(self, exc):
                self.exceptions.append(exc)

            def set_status(self, status):
                self.status = status

        class Tracer:
            @contextlib.contextmanager
            def start_as_current_span(self, name, context=None, kind=None, attributes=None):
                span = Span(name, (context or {}).get("traceparent"), kind, attributes)
                token = fake.current.set(span)
                try:
                    yield span
                finally:
                    fake.current.reset(token)
                    fake.spans.append(span)

        def inject(carrier):
            span = fake.current.get()
            if span is not None:
                carrier["traceparent"] = span.traceparent

        self.propagate = types.ModuleType("opentelemetry.propagate")
        self.propagate.inject = inject
        self.propagate.extract = lambda carrier: {"traceparent": carrier.get("traceparent")}
        self.trace = types.ModuleType("opentelemetry.trace")
        self.trace.SpanKind = types.SimpleNamespace(CONSUMER="consumer")
        self.trace.StatusCode = types.SimpleNamespace(ERROR="error")
        self.trace.Status = lambda code, description=None: (code, description)
        self.trace.get_tracer = lambda name: Tracer()
        self.package = types.ModuleType("opentelemetry")
        self.package.propagate, self.package.trace = self.propagate, self.trace
        self.Span = Span

    @contextlib.contextmanager
    def installed(self):
        names = {"opentelemetry": self.package, "opentelemetry.propagate": self.propagate,
                 "opentelemetry.trace": self.trace}
        saved = {n: sys.modules.get(n) for n in names}
        sys.modules.update(names)
        _otel._forget()
        try:
            yield self
        finally:
            for n, m in saved.items():
                if m is None:
                    sys.modules.pop(n, None)
                else:
                    sys.modules[n] = m
            _otel._forget()

    @contextlib.contextmanager
    def ambient_span(self, traceparent):
        """A current span of the application, as its own tracing would have."""
        span = self.Span("request", None, None, None)
        span.traceparent = traceparent
        token = self.current.set(span)
        try:
            yield
        finally:
            self.current.reset(token)


class Traces(ServerTest):

    def run_one(self, t, handler):
        w = kvq.Worker(self.client, worker_id=uniq("w"), register=False)
        w.register(t, handler)
        return w.drain()

    def test_no_opentelemetry_here_so_an_add_sends_no_trace_header(self):
        if importlib.util.find_spec("opentelemetry") is not None:
            self.skipTest("the OpenTelemetry API is installed here: this test is of an "
                          "environment without it")
        self.assertEqual(_otel.trace_headers(), {})
        proxy = RecordingProxy(self.server.url)
        self.addCleanup(proxy.close)
        t = self.new_type()
        kvq.Client(proxy.url).add(t, "j", {"n": 1})
        kvq.Client(proxy.url).add_many(t, [("k", {})])
        self.assertEqual([("traceparent" in h) for _, h in proxy.seen], [False, False])
        seen = []
        self.assertEqual(self.run_one(t, lambda job: seen.append(job.traceparent)), 2)
        self.assertEqual(seen, [None, None])

    def test_an_explicit_traceparent_round_trips_to_the_handler(self):
        t = self.new_type()
        self.client.add(t, "j", {"n": 1}, traceparent=PARENT)
        self.client.add_many(t, [{"id": "k", "data": {}, "traceparent": AMBIENT}, ("none", {})])
        self.assertEqual(self.client.get(t, "j")["traceparent"], PARENT)
        self.assertNotIn("traceparent", self.client.get(t, "none"))
        seen = {}
        self.run_one(t, lambda job: seen.__setitem__(job.id, job.traceparent))
        self.assertEqual(seen, {"j": PARENT, "k": AMBIENT, "none": None})

    def test_an_invalid_traceparent_is_refused(self):
        t = self.new_type()
        with self.assertRaises(kvq.InvalidArgument):
            self.client.add(t, "j", traceparent="00-not-a-trace-01")
        with self.assertRaises(kvq.NotFound):
            self.client.get(t, "j")

    def test_with_opentelemetry_an_add_sends_the_current_span_as_its_header(self):
        fake = FakeOtel()
        proxy = RecordingProxy(self.server.url)
        self.addCleanup(proxy.close)
        t = self.new_type()
        with fake.installed(), fake.ambient_span(AMBIENT):
            kvq.Client(proxy.url).add(t, "j")
            kvq.Client(proxy.url).add_many(t, [("k", {})])
        with fake.installed():  # no current span: nothing to send
            kvq.Client(proxy.url).add(t, "outside")
        self.assertEqual([h.get("traceparent") for _, h in proxy.seen], [AMBIENT, AMBIENT, None])
        # The server keeps the header's context.
        self.assertEqual(self.client.get(t, "j")["traceparent"], AMBIENT)
        self.assertEqual(self.client.get(t, "k")["traceparent"], AMBIENT)

    def test_with_opentelemetry_the_handler_runs_in_a_consumer_span_with_its_outcome(self):
        fake = FakeOtel()
        t = self.new_type(max_attempts=5)
        self.client.add(t, "ok")
        self.client.add(t, "bad")
        inner = {}

        def handler(job):
            inner[job.id] = fake.current.get()  # the span is current in the handler
            if job.id == "bad":
                raise ValueError("bad input")
            return "done"

        with fake.installed():
            self.assertEqual(self.run_one(t, handler), 2)
        spans = {s.attributes["messaging.message.id"]: s for s in fake.spans}
        self.assertEqual(sorted(spans), ["bad", "ok"])
        ok, bad = spans["ok"], spans["bad"]
        self.assertEqual((ok.name, ok.kind, ok.parent), ("%s process" % t, "consumer", None))
        self.assertEqual(ok.attributes, {"messaging.system": "kvq",
                                         "messaging.operation": "process",
                                         "messaging.destination.name": t,
                                         "messaging.message.id": "ok",
                                         "kvq.outcome": "succeeded"})
        self.assertIsNone(ok.status)
        self.assertEqual(bad.attributes["kvq.outcome"], "failed")
        self.assertEqual(bad.status, ("error", "bad input"))
        self.assertEqual([str(e) for e in bad.exceptions], ["bad input"])
        self.assertIs(inner["ok"], ok)

    def test_with_opentelemetry_the_span_continues_the_jobs_trace(self):
        fake = FakeOtel()
        t = self.new_type()
        self.client.add(t, "j", traceparent=PARENT)
        with fake.installed():
            self.run_one(t, lambda job: None)
        [span] = fake.spans
        self.assertEqual(span.parent, PARENT)
        self.assertEqual(span.traceparent.split("-")[1], PARENT.split("-")[1])


if __name__ == "__main__":
    unittest.main()
