"""A simulated power loss, for both durabilities (docs/operations.md, "What each durability
promises"). The data directory is on ext4 in a loop-mounted image; at a random moment, while
producers add jobs, the image file is snapshotted (a reflink clone on XFS: one instant, taken
without any sync), so the copy holds only what ext4 had written to its block device then. The copy
is then mounted (ext4 replays its journal) and served:

  durable: it opens, and every add acknowledged before the copy began is in it;
  relaxed: it opens, and the adds missing are the last ones acknowledged, spanning at most
           RELAXED_WINDOW seconds of acknowledgements: a sync every second, and when a sync
           falls two seconds behind (a slow or busy disk) writes wait for it, so what a power
           loss takes is bounded even while the disk stalls (plus the sync's own time and margin).

The relaxed store is also cut while another program has the kernel write its dirty pages back
(a syncfs, as `sync` or a backup tool makes): LMDB's meta pages then reach the disk between kvq's
own syncs, with or ahead of the data pages they point at, and the store must still open whole.
"""
import os
import random
import subprocess
import threading
import time
import unittest

import disks

TRIALS = 3
RELAXED_WINDOW = 2.5
PRODUCERS = 4


class Producers:
    """Threads adding jobs one at a time, recording when each add was acknowledged."""

    def __init__(self, client, jtype):
        self.client, self.jtype = client, jtype
        self.acked = {}  # id -> monotonic time of the 200
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._threads = [threading.Thread(target=self._run, args=(p,), daemon=True) for p in range(PRODUCERS)]

    def _run(self, p):
        i = 0
        while not self._stop.is_set():
            jid = "p%d-%d" % (p, i)
            i += 1
            try:
                r = self.client.add(self.jtype, jid, {"n": i})
            except OSError:
                return  # the server was killed
            if r.status == 200:
                t = time.monotonic()
                with self._lock:
                    self.acked[jid] = t

    def start(self):
        for t in self._threads:
            t.start()
        return self

    def stop(self):
        self._stop.set()
        for t in self._threads:
            t.join(30)

    def acked_before(self, t):
        with self._lock:
            return {jid: at for jid, at in self.acked.items() if at < t}


def job_ids(client, jtype):
    ids, cursor = set(), ""
    for _ in range(1000):
        r = client.get("/v1/jobs/%s?state=pending&limit=10000&cursor=%s" % (jtype, cursor))
        if r.status != 200:
            raise AssertionError("listing jobs: %s" % r)
        ids.update(j["id"] for j in r.json["jobs"])
        cursor = r.json["next_cursor"]
        if not cursor:
            return ids
    raise AssertionError("listing did not end")


class PowerLossTest(disks.MountedServersTest):
    TOOLS = ("cp", "mkfs.xfs", "sync")

    def setUp(self):
        super().setUp()
        self.host = self.mounts.reflink_host("host", 4 << 30)

    def trial(self, durability, seconds, writeback=False):
        image = os.path.join(self.host, "disk-%s.img" % durability)
        subprocess.run(["truncate", "-s", str(512 << 20), image], check=True)
        subprocess.run(["mkfs.ext4", "-q", "-F", image], check=True, capture_output=True)
        mnt = self.mounts.mount_image(image, "mnt")
        server = self.serve(os.path.join(mnt, "data"), durability)
        self.assertEqual(server.client().set_timeout("t", 60).status, 200)
        producers = Producers(server.client(), "t").start()
        time.sleep(seconds)  # the random moment of the power loss (nothing to wait for)
        flusher = None
        if writeback:
            # The cut falls while the kernel writes the dirty pages back (a syncfs of the
            # filesystem, started a moment before), not after it.
            flusher = subprocess.Popen(["sync", "-f", mnt])
            time.sleep(random.uniform(0.0, 0.01))
        cut = time.monotonic()
        copy = image + ".copy"
        self.mounts.snapshot(image, copy)
        copied = time.monotonic() - cut
        server.kill()
        producers.stop()
        if flusher:
            flusher.wait(30)
        acked = producers.acked_before(cut)
        self.mounts.unmount_last()
        os.unlink(image)

        mnt2 = self.mounts.mount_image(copy, "after")
        try:
            after = self.serve(os.path.join(mnt2, "data"), durability)
        except RuntimeError as e:
            self.fail("%s: the store did not open after the power loss at %.1f s: %s" % (durability, seconds, e))
        try:
            present = job_ids(after.client(), "t")
        except OSError as e:
            # Seen once in CI (a durable trial, 20k jobs): the connection closed without an
            # answer. A server that died fails the test here with its last words; one still
            # running is asked again on a new connection, and the drop is reported, since this
            # test judges what the store kept, not the connection (an open lead: see the note).
            if after.proc.poll() is not None:
                self.fail("%s: kvq serve died (%s) listing the jobs after the power loss at %.1f s: %r; "
                          "stderr:\n%s" % (durability, after.proc.poll(), seconds, e, after.stderr()))
            print("%s: listing the jobs dropped its connection (%r) with the server running; asking again"
                  % (durability, e), flush=True)
            present = job_ids(after.client(), "t")
        lost = {jid: at for jid, at in acked.items() if jid not in present}
        oldest_lost = max((cut - at for at in lost.values()), default=0.0)
        # How much of the acknowledgements was lost: from the first lost one to the last
        # acknowledged at all (every later one is lost too, or the window would be a gap).
        window = (max(acked.values()) - min(lost.values())) if lost else 0.0
        restored = "restored to its last synced state" in after.stderr()
        print("%s: cut at %.1f s, copy took %.2f s: %d adds acknowledged before the cut, %d lost, "
              "the oldest lost acknowledged %.2f s before the cut, %.2f s of acknowledgements lost%s"
              % (durability, seconds, copied, len(acked), len(lost), oldest_lost, window,
                 "; opened restored to its last synced state" if restored else ""), flush=True)
        if durability == "durable":
            self.assertFalse(restored, "a durable store keeps no record to restore")
        self.assertGreater(len(acked), 100, "too few adds to judge")
        after.kill()
        self.mounts.unmount_last()
        os.unlink(copy)
        return len(acked), lost, window

    def test_durable_loses_no_acknowledged_add(self):
        rng = random.Random()
        for _ in range(TRIALS):
            _, lost, _ = self.trial("durable", rng.uniform(2.0, 8.0))
            self.assertEqual(lost, {}, "acknowledged adds lost by a durable store")

    def test_relaxed_opens_every_time_and_loses_at_most_about_a_second(self):
        rng = random.Random()
        for _ in range(TRIALS):
            _, lost, window = self.trial("relaxed", rng.uniform(2.0, 8.0))
            self.assertLessEqual(window, RELAXED_WINDOW,
                                 "a relaxed store lost the last %.2f s of acknowledged adds" % window)

    def test_relaxed_opens_when_its_pages_are_written_back_between_syncs(self):
        rng = random.Random()
        for _ in range(TRIALS):
            _, lost, window = self.trial("relaxed", rng.uniform(2.0, 5.0), writeback=True)
            self.assertLessEqual(window, RELAXED_WINDOW,
                                 "a relaxed store lost the last %.2f s of acknowledged adds" % window)


if __name__ == "__main__":
    unittest.main()
