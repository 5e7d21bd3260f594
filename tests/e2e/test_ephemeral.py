"""`kvq serve --ephemeral`: the throwaway server client libraries' test helpers start.

Its promise (docs/operations.md): the first line on stdout is
`kvq serve: listening on http://127.0.0.1:PORT store lmdb:DIR (relaxed)`, on a port the kernel
chose, over a new temporary directory that is gone once the server has stopped on SIGTERM.
"""

import os
import re
import signal
import subprocess
import unittest

from kvq_server import KVQ_BIN, Client, uniq

_FIRST_LINE = re.compile(r"^kvq serve: listening on (http://127\.0\.0\.1:(\d+)) store lmdb:(\S+)")


class EphemeralTest(unittest.TestCase):
    def start(self, *args):
        proc = subprocess.Popen([KVQ_BIN, "serve", "--ephemeral", "--log-level", "error"] + list(args),
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.addCleanup(self.stop, proc)
        return proc

    @staticmethod
    def stop(proc):
        # SIGTERM, so that the directory goes too; SIGKILL only if it will not stop.
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        proc.stdout.close()
        proc.stderr.close()

    def test_serves_on_a_free_port_over_a_directory_removed_on_sigterm(self):
        proc = self.start()
        first = proc.stdout.readline()
        m = _FIRST_LINE.match(first)
        self.assertIsNotNone(m, "first line: %r" % first)
        url, port, data = m.group(1), int(m.group(2)), m.group(3)
        self.assertNotEqual(port, 0)
        self.assertTrue(os.path.isdir(data), data)

        client = Client(url)
        jtype = uniq("eph")
        client.set_timeout(jtype, 30)
        self.assertEqual(client.add(jtype, "j1", {"n": 1}).status, 200)
        r = client.accept(jtype)
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.json["jobs"][0]["id"], "j1")

        proc.send_signal(signal.SIGTERM)
        self.assertEqual(proc.wait(timeout=20), 0)
        self.assertFalse(os.path.exists(data), "%s is still there" % data)

    def test_two_at_once_get_their_own_ports_and_directories(self):
        lines = [p.stdout.readline() for p in (self.start(), self.start())]
        found = [_FIRST_LINE.match(line) for line in lines]
        self.assertTrue(all(found), lines)
        self.assertNotEqual(found[0].group(2), found[1].group(2))
        self.assertNotEqual(found[0].group(3), found[1].group(3))

    def test_refuses_a_data_directory_or_an_address_of_its_own(self):
        for extra in (["--data", "/tmp/x"], ["--listen", "127.0.0.1:7411"]):
            r = subprocess.run([KVQ_BIN, "serve", "--ephemeral"] + extra,
                               capture_output=True, text=True, timeout=20)
            self.assertEqual(r.returncode, 2, r)
            self.assertIn("--ephemeral", r.stderr)


if __name__ == "__main__":
    unittest.main()
