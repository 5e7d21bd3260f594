"""A full disk, for both durabilities, on a small tmpfs and on a small loop-mounted ext4 (where a
filling disk shows up as a short write, which LMDB reports as EIO). A ballast file takes part of
the space; jobs are added until the disk is full. Then:

  * the add that did not fit is answered 503 resource_exhausted, with a message saying the disk
    is full (not 500 internal, and the server does not die: it used to SIGBUS with nosync);
  * reads are still served, and /healthz answers 503 "cannot_write";
  * once the ballast is removed, /healthz is 200 again and adds succeed, without a restart;
  * after a restart every acknowledged add is there.
"""
import os
import time
import unittest

import disks
from kvq_server import wait_until

SIZE = 48 << 20
BALLAST = 12 << 20
PAYLOAD = "x" * (32 << 10)


class FullDiskTest(disks.MountedServersTest):
    def fill_and_recover(self, fs, durability):
        if fs == "tmpfs":
            mnt = self.mounts.tmpfs("fs-%s" % durability, SIZE)
        else:
            mnt = self.mounts.mount_image(self.mounts.ext4_image("disk-%s.img" % durability, SIZE), "fs-%s" % durability)
        ballast = os.path.join(mnt, "ballast")
        with open(ballast, "wb") as f:
            f.write(b"\0" * BALLAST)
            os.fsync(f.fileno())
        data = os.path.join(mnt, "data")
        server = self.serve(data, durability)
        c = server.client()
        self.assertEqual(c.set_timeout("t", 60).status, 200)
        acked, refused = [], None
        for i in range(10000):
            r = c.add("t", "j%d" % i, {"pad": PAYLOAD})
            if r.status == 200:
                acked.append("j%d" % i)
                continue
            refused = r
            break
        what = "%s on %s" % (durability, fs)
        self.assertIsNotNone(refused, "%s: the disk never filled" % what)
        print("%s: %d adds fitted; then %d %s" % (what, len(acked), refused.status, refused.body[:300]), flush=True)
        self.assertGreater(len(acked), 10, what)
        self.assertEqual(refused.status, 503, "%s: %s" % (what, refused))
        self.assertEqual(refused.json["error"], "resource_exhausted", what)
        self.assertIn("disk full", refused.json["message"], what)
        self.assertIsNone(server.proc.poll(), "%s: the server died" % what)
        # Reads go on; the health check tells a load balancer that writes cannot.
        self.assertEqual(c.job("t", acked[-1]).status, 200, what)
        health = c.get("/healthz")
        self.assertEqual(health.status, 503, "%s: %s" % (what, health))
        self.assertEqual(health.json["status"], "cannot_write", what)
        self.assertIn("disk full", health.json["message"], what)
        # Freed space is noticed by the health check itself, without a write or a restart.
        os.unlink(ballast)
        wait_until(lambda: c.get("/healthz").status == 200, 10, interval=0.1,
                   message="%s: /healthz to recover once space was freed" % what)
        r = c.add("t", "after", {"pad": "y"})
        self.assertEqual(r.status, 200, "%s: %s" % (what, r))
        acked.append("after")
        server.stop()
        again = self.serve(data, durability)
        missing = [j for j in acked if again.client().job("t", j).status != 200]
        self.assertEqual(missing, [], "%s: acknowledged adds lost" % what)
        again.stop()

    def test_durable_on_tmpfs(self):
        self.fill_and_recover("tmpfs", "durable")

    def test_relaxed_on_tmpfs(self):
        self.fill_and_recover("tmpfs", "relaxed")

    def test_durable_on_ext4(self):
        self.fill_and_recover("ext4", "durable")

    def test_relaxed_on_ext4(self):
        self.fill_and_recover("ext4", "relaxed")


if __name__ == "__main__":
    unittest.main()
