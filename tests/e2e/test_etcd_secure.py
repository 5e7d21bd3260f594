"""kvq serve on an etcd that requires TLS, a client certificate and a password."""

import os
import shutil
import subprocess
import tempfile
import unittest

from kvq_server import KVQ_BIN, KvqServer, uniq, wait_until
from test_etcd_cluster import free_port


def openssl(*args, cwd):
    subprocess.run(["openssl", *args], cwd=cwd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def make_certs(d):
    """A CA, a server certificate for 127.0.0.1 and a client certificate, all signed by the CA."""
    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=kvq-test-ca",
            "-keyout", "ca.key", "-out", "ca.pem", cwd=d)
    with open(os.path.join(d, "san.cnf"), "w") as f:
        f.write("subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth,clientAuth\n")
    for name in ("server", "client"):
        openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=" + ("root" if name == "client" else name),
                "-keyout", name + ".key", "-out", name + ".csr", cwd=d)
        openssl("x509", "-req", "-in", name + ".csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
                "-days", "2", "-extfile", "san.cnf", "-out", name + ".pem", cwd=d)


@unittest.skipIf(shutil.which("etcd") is None or shutil.which("etcdctl") is None or shutil.which("openssl") is None,
                 "needs Debian's etcd-server, etcd-client and openssl (scripts/install-deps.sh)")
class SecureEtcd(unittest.TestCase):

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="kvq-etcd-tls-")
        self.addCleanup(shutil.rmtree, self.dir, True)
        make_certs(self.dir)
        p = lambda n: os.path.join(self.dir, n)
        client, peer = free_port(), free_port()
        self.endpoint = "127.0.0.1:%d" % client
        url = "https://" + self.endpoint
        self.log = open(p("etcd.log"), "ab")
        self.addCleanup(self.log.close)
        self.etcd = subprocess.Popen(
            ["etcd", "--name", "s", "--data-dir", p("data"), "--listen-client-urls", url,
             "--advertise-client-urls", url, "--listen-peer-urls", "http://127.0.0.1:%d" % peer,
             "--initial-advertise-peer-urls", "http://127.0.0.1:%d" % peer,
             "--initial-cluster", "s=http://127.0.0.1:%d" % peer, "--cert-file", p("server.pem"),
             "--key-file", p("server.key"), "--trusted-ca-file", p("ca.pem"), "--client-cert-auth",
             "--max-txn-ops", "10000", "--log-level", "error"],
            stdin=subprocess.DEVNULL, stdout=self.log, stderr=self.log)
        self.addCleanup(lambda: (self.etcd.kill(), self.etcd.wait()))
        ctl = ["etcdctl", "--endpoints", url, "--cacert", p("ca.pem"), "--cert", p("client.pem"),
               "--key", p("client.key")]
        env = dict(os.environ, ETCDCTL_API="3")
        wait_until(lambda: subprocess.run(ctl + ["endpoint", "health"], env=env, capture_output=True).returncode == 0,
                   20, interval=0.1, message="etcd with TLS")
        subprocess.run(ctl + ["user", "add", "root:s3cret"], env=env, check=True, capture_output=True)
        subprocess.run(ctl + ["auth", "enable"], env=env, check=True, capture_output=True)
        self.tls = ["--etcd-ca", p("ca.pem"), "--etcd-cert", p("client.pem"), "--etcd-key", p("client.key")]

    def serve_args(self, password):
        return ["--store", "etcd://%s/%s" % (self.endpoint, uniq("kvq"))] + self.tls + \
               ["--etcd-user", "root", "--etcd-password", password]

    def test_a_full_lifecycle_over_tls_with_a_password(self):
        server = KvqServer(extra_args=self.serve_args("s3cret")).start()
        self.addCleanup(server.cleanup)
        c = server.client()
        self.assertIn("etcd:", c.get("/healthz").json["store"])
        self.assertEqual(c.set_timeout("sec", 30).status, 200)
        self.assertEqual(c.add("sec", "j", {"secret": True}).status, 200)
        r = c.accept("sec", timeout=5)
        self.assertEqual(r.status, 200, r)
        lock = r.json["jobs"][0]["lock"]
        self.assertEqual(c.post("/v1/jobs/sec/j/finish", {"lock": lock}).status, 200)
        self.assertEqual(c.job("sec", "j").json["state"], "finished")

    def test_a_wrong_password_stops_kvq_serve_at_start(self):
        proc = subprocess.run([KVQ_BIN, "serve", "--listen", "127.0.0.1:0"] + self.serve_args("wrong"),
                              capture_output=True, text=True, timeout=30)
        self.assertEqual(proc.returncode, 1, proc.stderr)
        self.assertIn("cannot use etcd", proc.stderr)


if __name__ == "__main__":
    unittest.main()
