"""kvq serve under hostile clients: descriptor exhaustion, memory held before authentication,
and slow uploads against the server's budget for request bodies (http_server.h).

Each case runs a real `kvq serve` on loopback and measures the process itself, from /proc.
"""

import json
import os
import re
import select
import shutil
import socket
import threading
import time
import unittest

from kvq_server import KvqServer, open_fds, wait_until

PAGE = os.sysconf("SC_PAGE_SIZE")
TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid):
    """User plus system CPU time of a process so far, from /proc/PID/stat."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def memory(pid):
    """(VmRSS, VmHWM) of a process in bytes: its resident set now and at its peak."""
    out = {}
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                out[key] = int(value.split()[0]) * 1024
    return out["VmRSS"], out["VmHWM"]


def address(server):
    host, port = server.url.split("//")[1].rsplit(":", 1)
    return host, int(port)


def metric(server, name, **labels):
    r = server.client().get("/metrics")
    assert r.status == 200, r
    want = ",".join('%s="%s"' % kv for kv in sorted(labels.items()))
    for line in r.body.decode().splitlines():
        m = re.match(r'^(\w+)(?:\{(.*)\})? (\S+)$', line)
        if m and m.group(1) == name and ",".join(sorted((m.group(2) or "").split(","))) == want:
            return float(m.group(3))
    return None


def read_response(sock, timeout):
    """The status and JSON body of the one response on `sock`, or None if none arrives."""
    sock.settimeout(timeout)
    data = b""
    try:
        while b"\r\n\r\n" not in data:
            chunk = sock.recv(65536)
            if not chunk:
                return None
            data += chunk
        head, _, body = data.partition(b"\r\n\r\n")
        length = int(re.search(rb"(?i)content-length: *(\d+)", head).group(1))
        while len(body) < length:
            chunk = sock.recv(65536)
            if not chunk:
                break
            body += chunk
    except (socket.timeout, ConnectionResetError):
        return None
    status = int(head.split(b" ", 2)[1])
    headers = {k.strip().lower(): v.strip() for k, _, v in
               (line.decode().partition(":") for line in head.split(b"\r\n")[1:])}
    return status, headers, json.loads(body) if body else None


class LimitedServer(KvqServer):
    """kvq serve started under prlimit, so it has only `nofile` descriptors."""

    def __init__(self, nofile, **kw):
        super().__init__(**kw)
        self.nofile = nofile

    def args(self):
        return ["prlimit", "--nofile=%d:%d" % (self.nofile, self.nofile)] + super().args()


@unittest.skipUnless(shutil.which("prlimit"), "needs prlimit (util-linux) to limit kvq serve's descriptors")
class DescriptorExhaustion(unittest.TestCase):
    """Out of descriptors, the server pauses accepting instead of spinning, says so once per
    interval and counts it; once descriptors are free again it serves new clients."""

    NOFILE = 64
    IDLE = 200
    MAX_CPU = 0.20  # of one core, while out of descriptors

    def test_backs_off_counts_and_recovers(self):
        server = LimitedServer(self.NOFILE).start()
        self.addCleanup(server.cleanup)
        idle = []
        self.addCleanup(lambda: [s.close() for s in idle])
        for _ in range(self.IDLE):
            idle.append(socket.create_connection(address(server), timeout=5))
        wait_until(lambda: open_fds(server.pid) >= self.NOFILE - 1, 10, message="kvq serve to run out of descriptors")
        before, started = cpu_seconds(server.pid), time.monotonic()
        # A while out of descriptors: the old accept loop spun at >100% of a core here.
        deadline = started + 3
        while time.monotonic() < deadline:
            select.select([], [], [], deadline - time.monotonic())
        used = (cpu_seconds(server.pid) - before) / (time.monotonic() - started)
        self.assertLess(used, self.MAX_CPU, "kvq serve used %.0f%% of a core out of descriptors" % (used * 100))
        logged = server.stderr().count("cannot accept connections")
        self.assertTrue(1 <= logged <= 2, "logged %d times in 3 s:\n%s" % (logged, server.stderr()))
        for s in idle:
            s.close()
        idle.clear()
        client = server.client(timeout=2)

        def served():
            try:
                return client.get("/healthz").status == 200
            except OSError:
                return False
        wait_until(served, 20, interval=0.1, message="a new client served after the idle ones left")
        self.assertGreater(metric(server, "kvq_http_accept_errors_total", reason="emfile"), 0)
        print("\n[reliability] out of descriptors: %.1f%% of a core" % (used * 100))


class PreAuthenticationMemory(unittest.TestCase):
    """Tokenless clients are refused on their header: their bodies are never held."""

    CLIENTS = 300
    BODY = 1 << 20
    MAX_GROWTH = 32 << 20

    def test_tokenless_bodies_are_refused_unread(self):
        server = KvqServer(token="secret").start()
        self.addCleanup(server.cleanup)
        rss_before, _ = memory(server.pid)
        head = ("POST /v1/jobs/t HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                "Content-Length: %d\r\n\r\n" % self.BODY).encode()
        body = b" " * self.BODY
        results = [None] * self.CLIENTS
        start = threading.Barrier(self.CLIENTS)

        def client(i):
            with socket.create_connection(address(server), timeout=30) as s:
                start.wait()
                try:
                    s.sendall(head + body)
                except OSError:
                    pass  # refused and closed before the whole body went: as it should be
                results[i] = read_response(s, 30)

        threads = [threading.Thread(target=client, args=(i,)) for i in range(self.CLIENTS)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        _, peak = memory(server.pid)
        growth = peak - rss_before
        statuses = [r and r[0] for r in results]
        self.assertEqual(statuses.count(401), self.CLIENTS, statuses)
        self.assertTrue(all(r[2]["error"] == "unauthorized" for r in results))
        self.assertLess(growth, self.MAX_GROWTH, "peak RSS grew by %d MB" % (growth >> 20))
        print("\n[reliability] %d tokenless 1 MiB uploads: peak RSS +%.1f MB"
              % (self.CLIENTS, growth / (1 << 20)))


class SlowUploads(unittest.TestCase):
    """Authenticated clients that start bodies and stall hold at most --max-body-memory
    between them; past it the server answers 503 with Retry-After, and it recovers once the
    bodies it holds are done."""

    BUDGET = 8 << 20
    BODY = 1 << 20
    CLIENTS = 40

    def test_body_budget_bounds_stalled_uploads(self):
        server = KvqServer(token="secret", max_body=self.BODY,
                           extra_args=["--max-body-memory", str(self.BUDGET)]).start()
        self.addCleanup(server.cleanup)
        t = "slow"
        self.assertEqual(server.client().put("/v1/types/%s" % t, {"timeout": 30}).status, 200)
        rss_before, _ = memory(server.pid)
        # A valid job padded with whitespace: job data itself may not exceed 256 KiB.
        full = json.dumps({"id": "big"}).encode().ljust(self.BODY)
        head = ("POST /v1/jobs/%s HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer secret\r\n"
                "Content-Type: application/json\r\nContent-Length: %d\r\n\r\n" % (t, self.BODY)).encode()
        socks = []
        self.addCleanup(lambda: [s.close() for s in socks])
        for _ in range(self.CLIENTS):
            s = socket.create_connection(address(server), timeout=10)
            s.sendall(head + full[:1024])
            socks.append(s)
        held = self.BUDGET // self.BODY
        # Those over the budget are answered at once; the others wait for their bodies.
        refused, waiting = [], []
        for s in socks:
            readable, _, _ = select.select([s], [], [], 2 if len(refused) < self.CLIENTS - held else 0.5)
            (refused if readable else waiting).append(s)
        answers = [read_response(s, 5) for s in refused]
        self.assertEqual(len(waiting), held, answers)
        for status, headers, body in answers:
            self.assertEqual(status, 503, body)
            self.assertEqual(body["error"], "unavailable")
            self.assertEqual(headers.get("retry-after"), "1")
        _, peak = memory(server.pid)
        growth = peak - rss_before
        self.assertLess(growth, self.BUDGET + (16 << 20), "peak RSS grew by %d MB" % (growth >> 20))
        # One held upload completes: it is served, and its share of the budget is free again.
        waiting[0].sendall(full[1024:])
        status, _, body = read_response(waiting[0], 10)
        self.assertEqual(status, 200, body)
        late = socket.create_connection(address(server), timeout=10)
        socks.append(late)
        late.sendall(head + full)
        status, _, body = read_response(late, 10)
        self.assertEqual(status, 200, body)  # the job replaced: the budget let it in
        print("\n[reliability] %d stalled 1 MiB uploads, budget %d MiB: %d held, %d refused; peak RSS +%.1f MB"
              % (self.CLIENTS, self.BUDGET >> 20, len(waiting), len(refused), growth / (1 << 20)))


if __name__ == "__main__":
    unittest.main()
