"""kvq serve's operator log on stderr: a line per request (text and JSON), levels, what the
server does on its own (monitor re-enqueues, retention), start and stop; --listen with a host
name."""

import json
import re
import subprocess
import time
import unittest

from kvq_server import KVQ_BIN, KvqServer, q, uniq, wait_until

TIME = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z"


def log_of(server):
    """Everything the server wrote on stderr so far (not only its tail)."""
    server._stderr.seek(0)
    return server._stderr.read().decode(errors="replace")


def lines_with(server, needle):
    return [line for line in log_of(server).splitlines() if needle in line]


class ServeLogTest(unittest.TestCase):
    def server(self, *args):
        s = KvqServer(extra_args=list(args)).start()
        self.addCleanup(s.cleanup)
        return s

    def test_a_request_is_one_text_line_with_status_and_latency(self):
        s = self.server()
        t = uniq("log")
        s.client().set_timeout(t, 30)
        self.assertEqual(s.client().add(t, "j1").status, 200)
        self.assertEqual(s.client().job(t, "missing").status, 404)
        added = wait_until(lambda: lines_with(s, "path=/v1/jobs/%s " % t), 5,
                           message="the add's log line")
        self.assertEqual(len(added), 1, added)
        self.assertRegex(added[0], r"^%s info request method=POST path=/v1/jobs/%s status=200 "
                                   r"latency_ms=\d+\.\d{3} client=127\.0\.0\.1:\d+ "
                                   r"route=/v1/jobs/\{type\}$" % (TIME, re.escape(t)))
        missing = wait_until(lambda: lines_with(s, "path=/v1/jobs/%s/missing " % t), 5,
                             message="the get's log line")
        self.assertEqual(len(missing), 1, missing)
        self.assertIn(" status=404 ", missing[0])
        # Start-up is logged too, with the address it listens on.
        self.assertTrue(lines_with(s, " info listening url=%s " % s.url), log_of(s))

    def test_json_lines_are_objects_with_fixed_keys(self):
        s = self.server("--log-format", "json")
        t = uniq("json")
        s.client().set_timeout(t, 30)
        self.assertEqual(s.client().add(t, "j1").status, 200)
        found = wait_until(lambda: lines_with(s, '"path":"/v1/jobs/%s"' % t), 5,
                           message="the add's log line")
        self.assertEqual(len(found), 1, found)
        line = json.loads(found[0])
        self.assertEqual(list(line)[:3], ["time", "level", "msg"])
        self.assertRegex(line["time"], "^%s$" % TIME)
        self.assertEqual((line["level"], line["msg"], line["method"], line["status"]),
                         ("info", "request", "POST", 200))
        self.assertIsInstance(line["latency_ms"], float)
        self.assertGreaterEqual(line["latency_ms"], 0)
        self.assertRegex(line["client"], r"^127\.0\.0\.1:\d+$")
        # Every line on stderr is JSON, the start-up lines included.
        for raw in log_of(s).splitlines():
            self.assertIn("msg", json.loads(raw), raw)
        self.assertTrue(s.stop())
        events = [json.loads(raw)["msg"] for raw in log_of(s).splitlines()]
        self.assertIn("stopping", events)
        self.assertEqual(events[-1], "stopped")

    def test_warn_logs_no_request(self):
        s = self.server("--log-level", "warn")
        t = uniq("quiet")
        s.client().set_timeout(t, 30)
        for i in range(5):
            self.assertEqual(s.client().add(t, "j%d" % i).status, 200)
        self.assertEqual(s.client().get("/healthz").status, 200)
        time.sleep(0.3)
        self.assertEqual(lines_with(s, " request "), [])
        self.assertEqual(lines_with(s, " info "), [])

    def test_the_monitor_and_retention_say_what_they_did(self):
        s = self.server()
        c = s.client()
        t = uniq("lost")
        self.assertEqual(c.put("/v1/types/%s" % q(t), {"timeout": 0.3}).status, 200)
        self.assertEqual(c.add(t, "j1").status, 200)
        self.assertEqual(c.accept(t, timeout=1).status, 200)  # never updated: lost
        lost = wait_until(lambda: lines_with(s, "monitor re-enqueued lost runs"), 10,
                          message="the monitor's line")
        self.assertRegex(lost[0], r"^%s info monitor re-enqueued lost runs count=\d+ total=\d+$"
                         % TIME)
        kept = uniq("kept")
        self.assertEqual(c.put("/v1/types/%s" % q(kept),
                               {"timeout": 30, "finished_retention": 0.5}).status, 200)
        self.assertEqual(c.add(kept, "j1").status, 200)
        accepted = c.accept(kept, timeout=1)
        self.assertEqual(accepted.status, 200)
        lock = accepted.json["jobs"][0]["lock"]
        self.assertEqual(c.post("/v1/jobs/%s/j1/finish" % q(kept), {"lock": lock}).status, 200)
        removed = wait_until(lambda: lines_with(s, "retention removed finished jobs"), 10,
                             message="the retention line")
        self.assertIn(" count=1 ", removed[0])

    def test_listen_takes_a_host_name(self):
        s = self.server("--listen", "localhost:0")
        self.assertRegex(s.url, r"^http://127\.0\.0\.1:\d+$")
        self.assertEqual(s.client().get("/healthz").status, 200)

    def test_bad_log_flags_are_usage_errors(self):
        for args, message in ((["--log-format", "xml"], "--log-format wants text or json"),
                              (["--log-level", "loud"], "--log-level wants error, warn, info or debug"),
                              (["--listen", "no-such-host.invalid:0"], "cannot resolve")):
            r = subprocess.run([KVQ_BIN, "serve", "--data", "/nonexistent/kvq"] + args,
                               capture_output=True, text=True, timeout=30)
            self.assertIn(message, r.stderr, (args, r.stderr))
            self.assertEqual(r.returncode, 1 if message == "cannot resolve" else 2, r.stderr)


if __name__ == "__main__":
    unittest.main()
