"""beanstalkd's protocol through clients nobody here wrote (issue 22).

The same scenarios (put/reserve/delete, priorities across watched tubes, delays, TTR expiry and
DEADLINE_SOON, touch, release, bury and kicks, peeks, stats, tubes, pause-tube, fencing between
connections, binary bodies, disconnects) run through two third-party clients and their normal
public APIs:
  - PHP's pheanstalk from Debian (php-pda-pheanstalk): beanstalk_clients/scenarios.php
  - npm's jackd, pinned by beanstalk_clients/node/package-lock.json and installed by `npm ci`
    when this module starts: beanstalk_clients/node/scenarios.js
against two servers:
  - Debian's real beanstalkd, which proves the scenarios test the protocol, not kvq;
  - `kvq serve --beanstalk-listen`, which must pass the same scenarios. Where kvq deliberately
    differs from beanstalkd (docs/beanstalk.md), the scripts check kvq's documented behaviour
    and say so beside the check (they are told which server they talk to).
Each scenario is one process and one test, named test_<client>_<scenario>; it prints
"ok <scenario>" or "FAIL <scenario>: <what differed>".
"""

import json
import os
import socket
import subprocess
import tempfile
import time
import unittest

from kvq_server import KVQ_BIN, KvqServer, serve_supports, uniq

CLIENTS_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "beanstalk_clients")
NODE_DIR = os.path.join(CLIENTS_DIR, "node")
PHP_SCRIPT = os.path.join(CLIENTS_DIR, "scenarios.php")
NODE_SCRIPT = os.path.join(NODE_DIR, "scenarios.js")

# Both scripts hold exactly these (test_scripts_hold_the_same_scenarios checks it).
SCENARIOS = [
    "put_reserve_delete",
    "priorities_across_tubes",
    "delay",
    "ttr_expiry",
    "touch",
    "release_priority_delay",
    "bury_kick",
    "peeks",
    "stats",
    "tubes",
    "pause_tube",
    "foreign_connection",
    "binary_bodies",
    "disconnect_releases",
]
CLIENTS = {
    "php": ["php", PHP_SCRIPT],
    "node": ["node", NODE_SCRIPT],
}
SCENARIO_TIMEOUT = 60


def setUpModule():
    # The exact jackd the lock file names, fresh: `npm ci` removes node_modules first.
    r = subprocess.run(["npm", "ci", "--no-audit", "--no-fund", "--loglevel=error"], cwd=NODE_DIR,
                       capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        raise RuntimeError("npm ci in %s failed (%d):\n%s%s"
                           % (NODE_DIR, r.returncode, r.stdout, r.stderr))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_port(port, alive, timeout=20):
    """Until 127.0.0.1:port accepts a connection; alive() False means the server died."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            if not alive():
                raise RuntimeError("server exited before listening on port %d" % port)
            if time.monotonic() > deadline:
                raise RuntimeError("nothing listens on port %d after %d s" % (port, timeout))
            time.sleep(0.05)


class Beanstalkd:
    """Debian's beanstalkd on a free loopback port, in memory (no binlog)."""

    kind = "beanstalkd"

    def start(self):
        self.port = free_port()
        self._log = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(["beanstalkd", "-l", "127.0.0.1", "-p", str(self.port)],
                                     stdin=subprocess.DEVNULL, stdout=self._log,
                                     stderr=subprocess.STDOUT)
        wait_for_port(self.port, lambda: self.proc.poll() is None)
        return self

    def alive(self):
        return self.proc.poll() is None

    def last_words(self):
        self._log.seek(0)
        return self._log.read().decode(errors="replace")[-4000:]

    def cleanup(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(10)
        self._log.close()


class KvqBeanstalk:
    """`kvq serve` with its HTTP listener and the beanstalkd protocol on a second loopback port."""

    kind = "kvq"

    def start(self):
        if not serve_supports("--beanstalk-listen"):
            raise RuntimeError("%s serve has no --beanstalk-listen (the beanstalkd protocol "
                               "front end, issue 22)" % KVQ_BIN)
        self.port = free_port()
        self.server = KvqServer(
            extra_args=["--beanstalk-listen", "127.0.0.1:%d" % self.port]).start()
        wait_for_port(self.port, self.alive)
        return self

    def alive(self):
        return self.server.proc.poll() is None

    def last_words(self):
        return self.server.stderr()

    def cleanup(self):
        self.server.cleanup()


class Scenarios:
    """The scenarios as tests against `server_type` (a mixin: test methods are added below)."""

    server_type = None

    @classmethod
    def setUpClass(cls):
        cls.server = cls.server_type().start()

    @classmethod
    def tearDownClass(cls):
        cls.server.cleanup()

    def setUp(self):
        self._check_alive()
        self.addCleanup(self._check_alive)

    def _check_alive(self):
        # Name the test during which the server died, with its last words, and start a fresh
        # one so the rest of the class still tests something.
        if not self.server.alive():
            last_words = self.server.last_words()
            self.server.cleanup()
            type(self).server = self.server_type().start()
            self.fail("the %s server exited during this test (restarted it); its output:\n%s"
                      % (self.server.kind, last_words))

    def run_scenario(self, client, scenario):
        command = CLIENTS[client] + ["127.0.0.1", str(self.server.port), self.server.kind,
                                     scenario, uniq("tube")]
        try:
            r = subprocess.run(command, capture_output=True, text=True, timeout=SCENARIO_TIMEOUT)
        except subprocess.TimeoutExpired as e:
            self.fail("%s did not finish in %d s; output so far: %r"
                      % (" ".join(command), SCENARIO_TIMEOUT, e.stdout))
        lines = r.stdout.strip().splitlines()
        self.assertEqual(
            (r.returncode, lines[-1:]), (0, ["ok " + scenario]),
            "%s\nexit %d; stdout:\n%s\nstderr:\n%s"
            % (" ".join(command), r.returncode, r.stdout, r.stderr[-3000:]))


def _scenario_test(client, scenario):
    def test(self):
        self.run_scenario(client, scenario)
    test.__name__ = "test_%s_%s" % (client, scenario)
    test.__doc__ = "%s runs the %s scenario" % (client, scenario)
    return test


for _client in CLIENTS:
    for _scenario in SCENARIOS:
        setattr(Scenarios, "test_%s_%s" % (_client, _scenario), _scenario_test(_client, _scenario))


class RealBeanstalkdTest(Scenarios, unittest.TestCase):
    """The scenarios hold for beanstalkd itself: they test the protocol."""

    server_type = Beanstalkd


class KvqBeanstalkTest(Scenarios, unittest.TestCase):
    """The same scenarios against `kvq serve --beanstalk-listen`."""

    server_type = KvqBeanstalk


class ScriptsTest(unittest.TestCase):
    def test_scripts_hold_the_same_scenarios(self):
        for client, command in CLIENTS.items():
            r = subprocess.run(command + ["127.0.0.1", "1", "beanstalkd", "list", "unused"],
                               capture_output=True, text=True, timeout=60)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertEqual(r.stdout.split(), SCENARIOS, client)

    def test_node_modules_are_the_locked_jackd(self):
        with open(os.path.join(NODE_DIR, "node_modules", "jackd", "package.json")) as f:
            installed = json.load(f)["version"]
        with open(os.path.join(NODE_DIR, "package.json")) as f:
            pinned = json.load(f)["dependencies"]["jackd"]
        self.assertEqual(installed, pinned)


if __name__ == "__main__":
    unittest.main()
