"""Helpers for the kvq end-to-end tests: run a real `kvq serve` and talk to it.

Standard library only. The kvq binary comes from $KVQ_BIN
(default /work/main/build/release/src/cli/kvq).
"""

import http.client
import itertools
import json
import os
import queue
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import urllib.parse

KVQ_BIN = os.environ.get("KVQ_BIN", "/work/main/build/release/src/cli/kvq")

_LISTEN_RE = re.compile(r"listening on (https?://\S+)")
_BEANSTALK_RE = re.compile(r"beanstalkd protocol on (\S+)")
_ids = itertools.count(1)


def uniq(prefix="t"):
    """A name unique within this test run (valid as a type, id or worker id)."""
    return "%s-%d-%d" % (prefix, os.getpid(), next(_ids))


def q(segment):
    """Percent-encode one path segment."""
    return urllib.parse.quote(segment, safe="")


def wait_until(predicate, timeout, interval=0.02, message="condition"):
    """Poll predicate() until it returns a truthy value or the deadline passes."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError("timed out after %.1f s waiting for %s" % (timeout, message))
        time.sleep(interval)


def proc_status(pid):
    """Threads and VmRSS (bytes) of a process, from /proc/PID/status."""
    out = {}
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            key, _, value = line.partition(":")
            if key == "Threads":
                out["threads"] = int(value)
            elif key == "VmRSS":
                out["rss"] = int(value.split()[0]) * 1024
    return out


def note(*args):
    """Print a line of numbers only when KVQ_E2E_VERBOSE is set."""
    if os.environ.get("KVQ_E2E_VERBOSE"):
        print("[e2e]", *args, file=sys.stderr)


def open_fds(pid):
    return len(os.listdir("/proc/%d/fd" % pid))


class Response:
    def __init__(self, status, headers, body):
        self.status = status
        self.headers = headers  # dict, lower-case names
        self.body = body        # bytes

    @property
    def json(self):
        return json.loads(self.body) if self.body else None

    @property
    def error(self):
        try:
            return (self.json or {}).get("error")
        except ValueError:
            return None

    def __repr__(self):
        return "<HTTP %d %r>" % (self.status, self.body[:600])


_DEFAULT = object()


def serve_supports(flag):
    """Whether this KVQ_BIN's `kvq serve --help` lists `flag` (e.g. "--tls-cert")."""
    try:
        r = subprocess.run([KVQ_BIN, "serve", "--help"], capture_output=True, text=True,
                           timeout=20)
    except OSError:
        return False
    return flag in r.stdout + r.stderr


# -- every JSON answer checked against docs/openapi.yaml -------------------------------------
# The spec is loaded once; each (operation, status) gets one compiled validator, its $refs
# inlined (the components do not recurse), so validating needs no shared resolver and is safe
# from many threads. KVQ_E2E_NO_SCHEMA=1 turns the check off (for a spec under repair only);
# KVQ_E2E_SCHEMA_LOG=FILE appends "METHOD route status" for each answer checked.
OPENAPI_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "docs",
                            "openapi.yaml")


class OpenApi:
    """docs/openapi.yaml as a checker of answers: check(method, target, status, content_type,
    body) raises AssertionError naming the route, status and what the schema refuses."""

    _lock = threading.Lock()
    _loaded = None

    @classmethod
    def get(cls):
        with cls._lock:
            if cls._loaded is None:
                cls._loaded = cls(OPENAPI_FILE)
            return cls._loaded

    def __init__(self, path):
        import jsonschema  # Debian's python3-jsonschema and python3-yaml
        import yaml
        with open(path) as f:  # libyaml's loader when there is one: 20 times as fast
            self.spec = yaml.load(f, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
        self._draft = jsonschema.Draft202012Validator
        self._best_match = jsonschema.exceptions.best_match
        self._validators = {}
        self._vlock = threading.Lock()
        # (method, pattern segments, pattern) for every operation
        self.operations = [(m.upper(), self.split(p), p)
                           for p, item in self.spec["paths"].items()
                           for m in item if m in ("get", "put", "post", "delete")]

    def resolve(self, node):
        """`node` with every local $ref replaced by what it names (siblings kept, as allOf)."""
        if isinstance(node, list):
            return [self.resolve(v) for v in node]
        if not isinstance(node, dict):
            return node
        out = {k: self.resolve(v) for k, v in node.items() if k != "$ref"}
        if "$ref" in node:
            target = self.spec
            for part in node["$ref"].lstrip("#/").split("/"):
                target = target[part]
            target = self.resolve(target)
            if not set(out) - {"description", "summary", "title"}:  # annotations only
                return target
            out.setdefault("allOf", []).append(target)
        return out

    @staticmethod
    def split(path):
        """Path segments as the server splits a request's (router.cc's split_target)."""
        segments = [urllib.parse.unquote(s) for s in path.split("?")[0].split("/")[1:]]
        if segments and segments[-1] == "":
            segments.pop()
        return segments

    def route(self, method, target):
        """(pattern, method's operation or None); pattern None when no path matches."""
        segments = self.split(target)
        matches = []
        for op_method, parts, pattern in self.operations:
            if len(parts) == len(segments) and all(
                    (p.startswith("{") and s) or p == s for p, s in zip(parts, segments)):
                literal = sum(not p.startswith("{") for p in parts)
                matches.append((op_method == method, literal, pattern))
        if not matches:
            return None, None
        allowed, _, pattern = max(matches)
        return pattern, (self.spec["paths"][pattern][method.lower()] if allowed else None)

    def _media(self, method, pattern, operation, status):
        """The described answer's media types: {type: schema or None}, computed once (for
        text/event-stream, its media type object)."""
        key = ("media", method, pattern, operation is None, status)
        with self._vlock:
            media = self._validators.get(key)
        if media is None:
            media = self._describe(method, pattern, operation, status)
            with self._vlock:
                self._validators[key] = media
        return media

    def _describe(self, method, pattern, operation, status):
        if operation is None:  # no route, or not this method: the server's error answer
            response = self.spec["components"]["responses"]["Error"]
        else:
            responses = operation["responses"]
            response = responses.get(str(status), responses.get("default"))
            if response is None:
                raise AssertionError("OpenAPI: %s %s does not describe status %d"
                                     % (method, pattern, status))
            response = self.resolve(response)
        # An event stream's entry is its media type object, whose x-event-data has the schemas.
        return {t.split(";")[0].strip(): m if t == "text/event-stream" else m.get("schema")
                for t, m in response.get("content", {}).items()}

    def validator(self, key, schema):
        with self._vlock:
            v = self._validators.get(key)
            if v is None:
                v = self._validators[key] = self._draft(self.resolve(schema))
            return v

    def check_value(self, what, key, schema, value):
        error = self._best_match(self.validator(key, schema).iter_errors(value))
        if error is not None:
            raise AssertionError("OpenAPI: %s: %s at %s; body %.600s"
                                 % (what, error.message, "/".join(map(str, error.absolute_path))
                                    or "(top)", json.dumps(value)))

    def check(self, method, target, status, content_type, body):
        pattern, operation = self.route(method, target)
        if os.environ.get("KVQ_E2E_SCHEMA_LOG"):  # which answers the suite checked
            with open(os.environ["KVQ_E2E_SCHEMA_LOG"], "a") as f:
                f.write("%s %s %d\n" % (method, pattern, status))
        what = "%s %s answered %d" % (method, pattern or target, status)
        media = self._media(method, pattern, operation, status)
        ctype = (content_type or "").split(";")[0].strip()
        if not body:
            if media:
                raise AssertionError("OpenAPI: %s with no body, described with %s"
                                     % (what, sorted(media)))
            return
        if ctype not in media:
            raise AssertionError("OpenAPI: %s as %r, described as %s"
                                 % (what, content_type, sorted(media) or "no body"))
        if ctype == "application/json":
            self.check_value(what, (pattern, method, status), media[ctype], json.loads(body))

    def check_event(self, target, name, data):
        pattern, operation = self.route("GET", target)
        if os.environ.get("KVQ_E2E_SCHEMA_LOG"):
            with open(os.environ["KVQ_E2E_SCHEMA_LOG"], "a") as f:
                f.write("GET %s event:%s\n" % (pattern, name))
        media = self._media("GET", pattern, operation, 200) if operation is not None else {}
        events = (media.get("text/event-stream") or {}).get("x-event-data", {})
        if name not in events:
            raise AssertionError("OpenAPI: GET %s sent an event %r it does not describe"
                                 % (pattern or target, name))
        self.check_value("GET %s event %r" % (pattern, name), (pattern, "event", name),
                         events[name], data)


def check_answer(method, target, response):
    """Raise AssertionError if `response` is not what docs/openapi.yaml describes."""
    if os.environ.get("KVQ_E2E_NO_SCHEMA") != "1" and method != "HEAD":
        OpenApi.get().check(method, target, response.status,
                            response.headers.get("content-type"), response.body)
    return response


class Client:
    """A tiny blocking HTTP client: one connection per request. For an https:// URL it
    speaks TLS, with `ssl_context` (an ssl.SSLContext) deciding whom to trust."""

    def __init__(self, url, token=None, timeout=30, ssl_context=None):
        parts = urllib.parse.urlsplit(url)
        self.host, self.port = parts.hostname, parts.port
        self.token = token
        self.timeout = timeout
        self.https = parts.scheme == "https"
        self.ssl_context = ssl_context

    def connection(self, timeout=None):
        """A new http.client connection to the server (HTTPS for an https:// URL)."""
        if self.https:
            return http.client.HTTPSConnection(self.host, self.port, timeout=timeout or self.timeout,
                                               context=self.ssl_context)
        return http.client.HTTPConnection(self.host, self.port, timeout=timeout or self.timeout)

    def _headers(self, token, extra):
        h = {}
        token = self.token if token is _DEFAULT else token
        if token is not None:
            h["Authorization"] = "Bearer " + token
        h.update(extra or {})
        return h

    def request(self, method, path, body=None, raw=None, headers=None,
                timeout=None, token=_DEFAULT):
        """body: a JSON value to send; raw: bytes/str sent as is."""
        h = self._headers(token, headers)
        data = raw
        if body is not None:
            data = json.dumps(body)
        if isinstance(data, str):
            data = data.encode()
        if data is not None:
            h.setdefault("Content-Type", "application/json")
        conn = self.connection(timeout)
        try:
            conn.request(method, path, body=data, headers=h)
            r = conn.getresponse()
            payload = r.read()
            return check_answer(method, path, Response(
                r.status, {k.lower(): v for k, v in r.getheaders()}, payload))
        finally:
            conn.close()

    def raw_request(self, method, path, body, timeout=10):
        """Send a request over a plain socket and read the response even if the
        server answers (and stops reading) before the whole body is sent, as it may
        for 413. Returns a Response; raises if no response arrived at all."""
        head = "%s %s HTTP/1.1\r\nHost: %s:%d\r\nContent-Type: application/json\r\n" \
               "Content-Length: %d\r\nConnection: close\r\n" % (method, path, self.host,
                                                                 self.port, len(body))
        if self.token:
            head += "Authorization: Bearer %s\r\n" % self.token
        sock = socket.create_connection((self.host, self.port), timeout=timeout)
        send_error = None
        try:
            try:
                sock.sendall(head.encode() + b"\r\n" + body)
            except OSError as e:  # the server stopped reading; its answer may be there
                send_error = e
            r = http.client.HTTPResponse(sock, method=method)
            try:
                r.begin()
            except (OSError, http.client.HTTPException) as e:
                raise AssertionError("no response (send error: %r, read error: %r)"
                                     % (send_error, e))
            payload = r.read()
            return check_answer(method, path, Response(
                r.status, {k.lower(): v for k, v in r.getheaders()}, payload))
        finally:
            sock.close()

    def get(self, path, **kw):
        return self.request("GET", path, **kw)

    def post(self, path, body=None, **kw):
        return self.request("POST", path, body=body, **kw)

    def put(self, path, body=None, **kw):
        return self.request("PUT", path, body=body, **kw)

    def delete(self, path, **kw):
        return self.request("DELETE", path, **kw)

    # -- conveniences used by many tests ----------------------------------
    def set_timeout(self, jtype, seconds):
        r = self.put("/v1/types/%s" % q(jtype), {"timeout": seconds})
        if r.status != 200:
            raise AssertionError("PUT type %s: %r" % (jtype, r))
        return r

    def add(self, jtype, jid, data=None, **fields):
        body = {"id": jid, "data": {} if data is None else data}
        body.update(fields)
        return self.post("/v1/jobs/%s" % q(jtype), body)

    def job(self, jtype, jid):
        return self.get("/v1/jobs/%s/%s" % (q(jtype), q(jid)))

    def accept(self, jtype, timeout=None, **fields):
        body = dict(fields)
        if timeout is not None:
            body["timeout"] = timeout
        return self.post("/v1/accept/%s" % q(jtype), body,
                         timeout=(timeout or 0) + 15)

    def events(self, path, timeout=10):
        return EventStream(self, path, timeout)


class EventStream:
    """A text/event-stream reader. `status`/`response` tell whether it opened."""

    def __init__(self, client, path, timeout):
        self.conn = client.connection(timeout)
        self.conn.request("GET", path, headers=client._headers(_DEFAULT, {"Accept": "text/event-stream"}))
        self.response = self.conn.getresponse()
        self.status = self.response.status
        self.headers = {k.lower(): v for k, v in self.response.getheaders()}
        self.body = self.response.read() if self.status != 200 else None
        self.path = path
        if self.status != 200:
            check_answer("GET", path, Response(self.status, self.headers, self.body))

    def next_event(self):
        """(event name, parsed data) of the next event, or None when the stream ends.
        Raises socket.timeout (TimeoutError) if nothing arrives in time."""
        name, data = None, []
        while True:
            line = self.response.readline()
            if not line:
                return None
            line = line.decode().rstrip("\r\n")
            if line == "":
                if name is None and not data:
                    continue
                name = name or "message"
                value = json.loads("\n".join(data)) if data else None
                if os.environ.get("KVQ_E2E_NO_SCHEMA") != "1":
                    OpenApi.get().check_event(self.path, name, value)
                return name, value
            if line.startswith(":"):
                continue
            field, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            if field == "event":
                name = value
            elif field == "data":
                data.append(value)

    def close(self):
        self.conn.close()


class KvqServer:
    """A `kvq serve` subprocess on a free port, with its own data directory
    (or a given one, so a restart can reuse it)."""

    def __init__(self, data_dir=None, token=None, durability="nosync",
                 max_body=None, extra_args=(), ssl_context=None):
        self._own_dir = data_dir is None
        self.data_dir = data_dir or tempfile.mkdtemp(prefix="kvq-e2e-")
        self.token = token
        self.durability = durability
        self.max_body = max_body
        self.extra_args = list(extra_args)
        self.ssl_context = ssl_context  # what client() trusts when the server speaks https
        self.proc = None
        self.url = None
        self.first_line = None
        self.beanstalk_address = None  # "HOST:PORT" with --beanstalk-listen

    @property
    def pid(self):
        return self.proc.pid

    def args(self):
        a = [KVQ_BIN, "serve", "--listen", "127.0.0.1:0", "--data", self.data_dir]
        if self.token is not None:
            a += ["--token", self.token]
        if self.durability is not None:
            a += ["--durability", self.durability]
        if self.max_body is not None:
            a += ["--max-body", str(self.max_body)]
        return a + self.extra_args

    def start(self, timeout=20):
        if not os.access(KVQ_BIN, os.X_OK):
            raise RuntimeError("kvq binary not found at %s (set KVQ_BIN)" % KVQ_BIN)
        self._stderr = tempfile.TemporaryFile()
        env = dict(os.environ)
        env.pop("KVQ_TOKEN", None)
        self.proc = subprocess.Popen(self.args(), stdin=subprocess.DEVNULL,
                                     stdout=subprocess.PIPE, stderr=self._stderr, env=env)
        found = queue.Queue()

        def pump(stream):
            # Find the URL, then keep draining stdout so the server never blocks on it.
            try:
                for raw in stream:
                    line = raw.decode(errors="replace")
                    b = _BEANSTALK_RE.search(line)
                    if b:  # printed before the URL line
                        self.beanstalk_address = b.group(1)
                    m = _LISTEN_RE.search(line)
                    if m and self.first_line is None:
                        self.first_line = line.strip()
                        found.put(m.group(1).rstrip("/"))
            except (OSError, ValueError):
                pass
            found.put(None)

        self._pump = threading.Thread(target=pump, args=(self.proc.stdout,), daemon=True)
        self._pump.start()
        try:
            url = found.get(timeout=timeout)
        except queue.Empty:
            url = None
        if url is None:
            self.kill()
            raise RuntimeError("kvq serve did not report its URL (args %s); stderr:\n%s"
                               % (self.args(), self.stderr()))
        self.url = url
        return self

    def stderr(self):
        self._stderr.seek(0)
        return self._stderr.read().decode(errors="replace")[-4000:]

    def client(self, token=_DEFAULT, timeout=30):
        return Client(self.url, self.token if token is _DEFAULT else token, timeout,
                      self.ssl_context)

    def stop(self, grace=10):
        """SIGTERM, wait up to `grace` seconds, then SIGKILL. Returns True if it
        exited on SIGTERM."""
        if self.proc is None or self.proc.poll() is not None:
            return True
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(grace)
            return True
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            return False

    def kill(self):
        """kill -9."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def _close_files(self):
        if getattr(self, "_pump", None) is not None:
            self._pump.join(2)
        for f in (self.proc and self.proc.stdout, getattr(self, "_stderr", None)):
            try:
                f and f.close()
            except (OSError, ValueError):
                pass

    def cleanup(self):
        self.stop()
        self._close_files()
        if self._own_dir:
            shutil.rmtree(self.data_dir, ignore_errors=True)


class ServerTestCase(unittest.TestCase):
    """One server per test class; override server_kwargs."""

    server_kwargs = {}

    @classmethod
    def setUpClass(cls):
        cls.server = KvqServer(**cls.server_kwargs).start()
        cls.c = cls.server.client()

    @classmethod
    def tearDownClass(cls):
        cls.server.cleanup()

    def setUp(self):
        self._check_alive()
        self.addCleanup(self._check_alive)

    def _check_alive(self):
        # Name the test during which the server died, with its last words, and start a
        # fresh server so the rest of the class still tests something.
        code = self.server.proc.poll()
        if code is not None:
            last_words = self.server.stderr()
            self.server.cleanup()
            cls = type(self)
            cls.server = KvqServer(**cls.server_kwargs).start()
            cls.c = cls.server.client()
            self.fail("kvq serve exited with %s during this test (restarted it); stderr:\n%s"
                      % (code, last_words))

    # -- assertions --------------------------------------------------------
    def assertStatus(self, r, status, error=None):
        self.assertEqual(r.status, status, "unexpected response %r" % (r,))
        if error is not None:
            body = r.json
            self.assertIsInstance(body, dict, r)
            self.assertEqual(body.get("error"), error, r)
            self.assertIsInstance(body.get("message"), str, r)
        return r.json if r.body else None

    def assertJobState(self, jtype, jid, state):
        r = self.c.job(jtype, jid)
        job = self.assertStatus(r, 200)
        self.assertEqual(job["state"], state, job)
        return job
