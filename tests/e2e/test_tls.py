"""kvq over TLS, the clients' side: the CLI (every kind of command: requests, long-polls,
event streams, kvq top and kvq bench), Python's http.client and the examples against a real
`kvq serve --tls-cert --tls-key`, and one with `--tls-client-ca` too. The certificates are
made here with the openssl command: a throwaway CA, a server certificate it signed for
localhost and 127.0.0.1, one for another name only, and a client certificate.

Skips, saying so, only when this kvq serve has no --tls-cert (its `kvq serve --help`)."""

import http.client
import json
import os
import shutil
import signal
import ssl
import subprocess
import sys
import tempfile
import threading
import unittest

from kvq_server import KVQ_BIN, KvqServer, q, serve_supports, uniq, wait_until

EXAMPLES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples", "python")
CRASH_SIGNS = ("Traceback", "terminate called", "Segmentation fault", "Aborted", "core dumped")
TLS_ENV = ("KVQ_URL", "KVQ_TOKEN", "KVQ_CA_CERT", "KVQ_CLIENT_CERT", "KVQ_CLIENT_KEY")


def make_certs(d):
    """Writes the CA, server, other-name and client certificates into d; returns their paths."""
    key = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]

    def openssl(*args):
        r = subprocess.run(["openssl", *args], capture_output=True, text=True, timeout=60)
        if r.returncode != 0:
            raise RuntimeError("openssl %s: %s" % (" ".join(args), r.stderr))

    p = {"ca": os.path.join(d, "ca.pem"), "ca_key": os.path.join(d, "ca.key")}
    openssl("req", "-x509", *key, "-keyout", p["ca_key"], "-out", p["ca"], "-days", "2",
            "-subj", "/CN=kvq-e2e-ca", "-addext", "basicConstraints=critical,CA:TRUE",
            "-addext", "keyUsage=critical,keyCertSign")
    for serial, (name, ext) in enumerate([
            # A SAN is what a client checks; an IP address must be an IP entry in it.
            ("server", "subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth"),
            ("other", "subjectAltName=DNS:other.invalid\nextendedKeyUsage=serverAuth"),
            ("client", "extendedKeyUsage=clientAuth")], start=1):
        base = os.path.join(d, name)
        with open(base + ".ext", "w") as f:
            f.write(ext + "\n")
        openssl("req", *key, "-keyout", base + ".key", "-out", base + ".csr", "-subj", "/CN=" + name)
        openssl("x509", "-req", "-in", base + ".csr", "-CA", p["ca"], "-CAkey", p["ca_key"],
                "-set_serial", str(serial), "-days", "2", "-out", base + ".pem",
                "-extfile", base + ".ext")
        p[name], p[name + "_key"] = base + ".pem", base + ".key"
    return p


def run(*cmd, env_add=None, timeout=60):
    """Runs a command without the kvq connection variables of this environment (plus env_add)."""
    env = {k: v for k, v in os.environ.items() if k not in TLS_ENV}
    env.update(env_add or {})
    return subprocess.run([str(c) for c in cmd], capture_output=True, text=True,
                          timeout=timeout, env=env)


def stop(p):
    """Kills a process if it still runs, and closes its pipes."""
    if p.poll() is None:
        p.kill()
    p.wait()
    for f in (p.stdout, p.stderr):
        if f is not None:
            f.close()


@unittest.skipUnless(serve_supports("--tls-cert"),
                     "this kvq serve has no --tls-cert (kvq serve --help): the server's side of "
                     "TLS is not in this build")
class Tls(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="kvq-e2e-tls-")
        cls.p = make_certs(cls.dir)
        cls.ctx = ssl.create_default_context(cafile=cls.p["ca"])
        cls.servers = []
        cls.server = cls.start_server(cls.p["server"], cls.p["server_key"])
        cls.c = cls.server.client()

    @classmethod
    def tearDownClass(cls):
        for s in cls.servers:
            s.cleanup()
        shutil.rmtree(cls.dir, ignore_errors=True)

    @classmethod
    def start_server(cls, cert, key, *extra):
        s = KvqServer(extra_args=["--tls-cert", cert, "--tls-key", key, *extra],
                      ssl_context=cls.ctx)
        cls.servers.append(s)
        s.start()
        if not s.url.startswith("https://127.0.0.1:"):
            raise AssertionError("a TLS server's start line should say https://: %r" % s.first_line)
        return s

    def kvq(self, *args, url=None, ca=True, env_add=None, timeout=60):
        """`kvq ARGS --url URL [--ca-cert CA]`."""
        cmd = [KVQ_BIN, *args, "--url", url or self.server.url]
        if ca:
            cmd += ["--ca-cert", self.p["ca"]]
        return run(*cmd, env_add=env_add, timeout=timeout)

    def assertExit(self, r, code):
        self.assertEqual(r.returncode, code, "exit %d, wanted %d\nstdout: %r\nstderr: %r"
                         % (r.returncode, code, r.stdout, r.stderr))
        for sign in CRASH_SIGNS:
            self.assertNotIn(sign, r.stdout + r.stderr)

    # -- the CLI -----------------------------------------------------------

    def test_cli_adds_accepts_and_finishes_over_https(self):
        t = uniq("tls")
        self.assertExit(self.kvq("timeout", t, "30"), 0)
        self.assertExit(self.kvq("add", t, "j1", '{"n": 1}'), 0)
        r = self.kvq("accept", t, "--json")
        self.assertExit(r, 0)
        job = json.loads(r.stdout)
        job = job["jobs"][0] if "jobs" in job else job
        self.assertEqual(job["id"], "j1")
        self.assertExit(self.kvq("finish", t, "j1", "--lock", job["lock"], '{"ok": true}'), 0)
        r = self.kvq("get", t, "j1", "--json")
        self.assertExit(r, 0)
        self.assertEqual(json.loads(r.stdout)["state"], "finished")
        # the CA from the environment instead of the flag
        r = self.kvq("get", t, "j1", ca=False, env_add={"KVQ_CA_CERT": self.p["ca"]})
        self.assertExit(r, 0)

    def test_cli_refuses_a_server_whose_certificate_it_does_not_trust(self):
        r = self.kvq("types", ca=False)  # the system's CAs: not the test CA
        self.assertExit(r, 1)
        self.assertIn("TLS handshake with %s: certificate verify failed" % self.server.url, r.stderr)

    def test_cli_refuses_a_certificate_for_another_host(self):
        other = self.start_server(self.p["other"], self.p["other_key"])
        r = self.kvq("types", url=other.url)
        self.assertExit(r, 1)
        self.assertIn("certificate verify failed (IP address mismatch", r.stderr)
        port = other.url.rsplit(":", 1)[1]
        r = self.kvq("types", url="https://localhost:" + port)
        self.assertExit(r, 1)
        self.assertIn("certificate verify failed (hostname mismatch", r.stderr)
        # the right certificate under its DNS name passes
        port = self.server.url.rsplit(":", 1)[1]
        self.assertExit(self.kvq("types", url="https://localhost:" + port), 0)

    def test_a_client_ca_server_refuses_a_cli_without_a_certificate_and_takes_one_with(self):
        s = self.start_server(self.p["server"], self.p["server_key"], "--tls-client-ca", self.p["ca"])
        r = self.kvq("types", url=s.url)
        self.assertExit(r, 1)
        self.assertIn(s.url, r.stderr)
        self.assertIn("client certificate", r.stderr)
        r = self.kvq("types", url=s.url, env_add={"KVQ_CLIENT_CERT": self.p["client"],
                                                  "KVQ_CLIENT_KEY": self.p["client_key"]})
        self.assertExit(r, 0)
        t = uniq("tls")
        r = self.kvq("bench", "--jobs", "20", "--type", t, "--json", url=s.url,
                     env_add={"KVQ_CLIENT_CERT": self.p["client"],
                              "KVQ_CLIENT_KEY": self.p["client_key"]})
        self.assertExit(r, 0)
        self.assertEqual(json.loads(r.stdout)["jobs"], 20)

    def test_cli_certificate_flags_are_checked_before_connecting(self):
        r = self.kvq("types", "--client-cert", self.p["client"])
        self.assertExit(r, 2)
        self.assertIn("a client certificate needs its client key", r.stderr)
        r = self.kvq("types", ca=False, env_add={"KVQ_CA_CERT": os.path.join(self.dir, "nope.pem")})
        self.assertExit(r, 2)
        self.assertIn("cannot read CA certificate file", r.stderr)
        r = run(KVQ_BIN, "types", "--url", "http://127.0.0.1:1", "--ca-cert", self.p["ca"])
        self.assertExit(r, 2)
        self.assertIn("need an https:// URL", r.stderr)

    def test_plain_http_to_the_tls_server_fails_cleanly(self):
        r = self.kvq("types", url=self.server.url.replace("https://", "http://"), ca=False)
        self.assertExit(r, 1)
        self.assertIn("use an https:// URL", r.stderr)

    def test_cli_wait_and_watch_over_https(self):
        t = uniq("tls")
        self.c.set_timeout(t, 30)
        self.assertEqual(self.c.add(t, "w").status, 200)
        watch = subprocess.Popen([KVQ_BIN, "watch", t, "w", "--json", "--url", self.server.url,
                                  "--ca-cert", self.p["ca"]],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.addCleanup(stop, watch)
        lines = []
        reader = threading.Thread(target=lambda: lines.extend(iter(watch.stdout.readline, "")),
                                  daemon=True)
        reader.start()
        wait_until(lambda: len(lines) >= 1, 15, message="kvq watch's first event over https")
        self.assertEqual(json.loads(lines[0])["state"], "pending")
        waiter = subprocess.Popen([KVQ_BIN, "wait", t, "w", "--state", "finished", "--url",
                                   self.server.url, "--ca-cert", self.p["ca"]],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.addCleanup(stop, waiter)
        job = self.c.accept(t, timeout=5).json["jobs"][0]
        # each change is printed as it happens, while the stream stays open
        wait_until(lambda: any(json.loads(x)["state"] == "running" for x in lines), 15,
                   message="kvq watch to show the job running")
        self.assertIsNone(watch.poll())
        self.assertEqual(self.c.post("/v1/jobs/%s/w/finish" % q(t), {"lock": job["lock"]}).status, 200)
        out, err = waiter.communicate(timeout=30)
        self.assertEqual(waiter.returncode, 0, err)
        wait_until(lambda: any(json.loads(x)["state"] == "finished" for x in lines), 15,
                   message="kvq watch to show the job finished")

    def test_cli_top_once_over_https(self):
        t = uniq("tls")
        self.c.set_timeout(t, 30)
        r = self.kvq("top", "--once", "--json")
        self.assertExit(r, 0)
        self.assertIn(t, [row["type"] for row in json.loads(r.stdout)["types"]])

    def test_bench_over_https(self):
        r = self.kvq("bench", "--jobs", "200", "--type", uniq("tlsbench"), "--json", timeout=120)
        self.assertExit(r, 0)
        out = json.loads(r.stdout)
        self.assertEqual(out["jobs"], 200)
        self.assertGreater(out["jobs_per_second"], 0)

    # -- Python's http.client ----------------------------------------------

    def test_http_client_long_poll_and_event_stream_over_https(self):
        t = uniq("tls")
        self.c.set_timeout(t, 30)
        got = {}

        def long_poll():
            got["r"] = self.c.accept(t, timeout=20)

        poller = threading.Thread(target=long_poll)
        poller.start()  # waits: the type has no job yet
        self.assertEqual(self.c.add(t, "lp", {"k": 1}).status, 200)
        stream = self.c.events("/v1/jobs/%s/lp/events" % q(t), timeout=20)
        self.addCleanup(stream.close)
        self.assertEqual(stream.status, 200, stream.body)
        poller.join(30)
        self.assertEqual(got["r"].status, 200, got["r"])
        self.assertEqual(got["r"].json["jobs"][0]["id"], "lp")
        states = []
        while "running" not in states:
            name, data = stream.next_event()
            self.assertEqual(name, "job")
            states.append(data["state"])
        self.assertEqual(self.c.post("/v1/jobs/%s/lp/finish" % q(t),
                                     {"lock": got["r"].json["jobs"][0]["lock"]}).status, 200)
        self.assertEqual(stream.next_event()[1]["state"], "finished")

    def test_http_client_without_the_ca_is_refused(self):
        c = self.server.client()
        conn = http.client.HTTPSConnection(c.host, c.port, timeout=10,
                                           context=ssl.create_default_context())  # system CAs
        with self.assertRaises(ssl.SSLCertVerificationError):
            conn.request("GET", "/healthz")
        conn.close()

    # -- the examples ------------------------------------------------------

    def test_examples_run_a_job_to_completion_over_https(self):
        t = uniq("tlsex")
        r = run(sys.executable, os.path.join(EXAMPLES, "producer.py"), "--url", self.server.url,
                "--ca-cert", self.p["ca"], "--type", t, "--count", "2")
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("added 2 jobs", r.stdout)
        worker = subprocess.Popen([sys.executable, os.path.join(EXAMPLES, "worker.py"), "--url",
                                   self.server.url, "--ca-cert", self.p["ca"], "--type", t,
                                   "--id", "tlsw", "--work-seconds", "0.1"],
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.addCleanup(stop, worker)
        wait_until(lambda: [j["state"] for j in self.c.get("/v1/jobs/%s" % q(t)).json["jobs"]]
                   == ["finished"] * 2, 30, 0.05, "the example worker to finish 2 jobs over https")
        worker.send_signal(signal.SIGINT)
        out, _ = worker.communicate(timeout=15)
        self.assertEqual(worker.returncode, 0, out)
        self.assertIn("unregistered", out)
        # without the CA, the producer names the failure instead of a traceback
        r = run(sys.executable, os.path.join(EXAMPLES, "producer.py"), "--url", self.server.url,
                "--type", t, "--count", "1")
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("CERTIFICATE_VERIFY_FAILED", r.stderr)
        self.assertNotIn("Traceback", r.stderr)

    def test_examples_present_a_client_certificate(self):
        s = self.start_server(self.p["server"], self.p["server_key"], "--tls-client-ca", self.p["ca"])
        t = uniq("tlsex")
        producer = [sys.executable, os.path.join(EXAMPLES, "producer.py"), "--url", s.url,
                    "--ca-cert", self.p["ca"], "--type", t, "--count", "1"]
        r = run(*producer)
        self.assertNotEqual(r.returncode, 0, r.stdout)
        self.assertNotIn("Traceback", r.stderr)
        cert = ["--client-cert", self.p["client"], "--client-key", self.p["client_key"]]
        r = run(*producer, *cert)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        worker = subprocess.Popen([sys.executable, os.path.join(EXAMPLES, "worker.py"), "--url", s.url,
                                   "--ca-cert", self.p["ca"], *cert, "--type", t, "--id", "tlscw",
                                   "--work-seconds", "0.1"],
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.addCleanup(stop, worker)
        lines = []
        reader = threading.Thread(target=lambda: lines.extend(iter(worker.stdout.readline, "")),
                                  daemon=True)
        reader.start()
        wait_until(lambda: any(x.startswith("finished ") for x in lines), 30, 0.05,
                   "the example worker with a client certificate to finish the job")
        worker.send_signal(signal.SIGINT)
        worker.wait(15)
        reader.join(5)
        self.assertEqual(worker.returncode, 0, "".join(lines))
        self.assertIn("worker tlscw unregistered\n", lines)


if __name__ == "__main__":
    unittest.main()
