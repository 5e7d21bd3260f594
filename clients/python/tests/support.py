# SPDX-License-Identifier: Apache-2.0
"""Test support: a real `kvq serve` on a free port with its own data directory.

The binary is $KVQ_BIN (ctest passes the one this build made)."""

import itertools
import os
import queue
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
PACKAGE_ROOT = os.path.dirname(HERE)
if PACKAGE_ROOT not in sys.path:
    sys.path.insert(0, PACKAGE_ROOT)

import kvq  # noqa: E402

KVQ_BIN = os.environ.get("KVQ_BIN", "")
_LISTEN_RE = re.compile(r"listening on (https?://\S+)")
_ids = itertools.count(1)


def uniq(prefix="t"):
    """A name unique within this test run."""
    return "%s-%d-%d" % (prefix, os.getpid(), next(_ids))


def wait_until(predicate, timeout, interval=0.02, message="condition"):
    """Poll predicate() until it is truthy (returning it) or fail after timeout seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError("timed out after %.1f s waiting for %s" % (timeout, message))
        time.sleep(interval)


class Server:
    """A `kvq serve` subprocess."""

    def __init__(self, token=None, port=0, data_dir=None):
        self.token = token
        self.port = port
        self.data_dir = data_dir or tempfile.mkdtemp(prefix="kvq-py-")
        self.proc = None
        self.url = None

    def start(self, timeout=20):
        if not KVQ_BIN or not os.access(KVQ_BIN, os.X_OK):
            raise RuntimeError("set KVQ_BIN to the kvq binary (got %r)" % KVQ_BIN)
        args = [KVQ_BIN, "serve", "--listen", "127.0.0.1:%d" % self.port, "--data", self.data_dir,
                "--durability", "nosync"]
        if self.token:
            args += ["--token", self.token]
        env = dict(os.environ)
        env.pop("KVQ_TOKEN", None)
        self._log = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, env=env)
        found = queue.Queue()

        def pump():
            for raw in self.proc.stdout:
                self._log.write(raw)
                m = _LISTEN_RE.search(raw.decode(errors="replace"))
                if m:
                    found.put(m.group(1).rstrip("/"))
            found.put(None)

        self._pump = threading.Thread(target=pump, daemon=True)
        self._pump.start()
        try:
            self.url = found.get(timeout=timeout)
        except queue.Empty:
            self.url = None
        if self.url is None:
            self.stop()
            raise RuntimeError("kvq serve did not report its URL:\n%s" % self.output())
        return self

    def output(self):
        self._log.seek(0)
        return self._log.read().decode(errors="replace")[-4000:]

    def stop(self, keep_data=False):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if getattr(self, "_log", None):
            self._pump.join(5)
            self._log.close()
            self._log = None
            self.proc.stdout.close()
        if not keep_data:
            shutil.rmtree(self.data_dir, ignore_errors=True)


class ServerTest(unittest.TestCase):
    """One server for the test class; self.client talks to it."""

    token = None

    @classmethod
    def setUpClass(cls):
        cls.server = Server(cls.token).start()
        cls.client = kvq.Client(cls.server.url, token=cls.token, timeout=10)

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()

    def new_type(self, timeout=30, **settings):
        """A fresh job type with this timeout and settings."""
        t = uniq("py")
        self.client.put_type(t, timeout, **settings)
        return t

    def run_worker(self, worker):
        """Run worker.run() in a thread; stop and join it at cleanup. Returns the thread."""
        th = threading.Thread(target=worker.run, daemon=True)
        th.start()

        def finish():
            worker.stop(grace=0)
            th.join(30)
            self.assertFalse(th.is_alive(), "the worker did not stop")
        self.addCleanup(finish)
        return th
