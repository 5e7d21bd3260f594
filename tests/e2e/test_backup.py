"""`kvq backup` against the data directory of a running `kvq serve` under load: the copy holds
every job acknowledged before it began, with its state, data and lock, and a second server
started on it carries on (a worker finishes the job it had accepted before the backup); bad
arguments are clear errors that change nothing."""

import json
import os
import shutil
import subprocess
import tempfile
import threading
import unittest

from kvq_server import KVQ_BIN, KvqServer, q

TYPE = "bk"


def kvq_backup(*args):
    return subprocess.run([KVQ_BIN, "backup"] + [str(a) for a in args], capture_output=True,
                          text=True, timeout=120)


class BackupOfARunningServer(unittest.TestCase):

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="kvq-e2e-backup-")
        self.addCleanup(shutil.rmtree, self.tmp, True)

    def check_backup_under_load(self, durability):
        source = KvqServer(durability=durability).start()
        self.addCleanup(source.cleanup)
        c = source.client(timeout=10)
        self.assertEqual(c.set_timeout(TYPE, 30).status, 200)
        for i in range(40):
            self.assertEqual(c.add(TYPE, "job-%02d" % i, {"n": i}).status, 200)
        r = c.post("/v1/accept/%s" % TYPE, {"count": 4, "worker": "w1"})
        self.assertEqual(r.status, 200, r)
        accepted = r.json["jobs"]
        self.assertEqual(len(accepted), 4)
        finished = accepted[:2]
        running = accepted[2:]
        for job in finished:
            r = c.post("/v1/jobs/%s/%s/finish" % (TYPE, q(job["id"])),
                       {"lock": job["lock"], "data": {"result": job["id"]}})
            self.assertEqual(r.status, 200, r)

        # Producers keep adding while the backup runs.
        added = []
        lock = threading.Lock()
        stop = threading.Event()
        enough = threading.Event()

        def producer(n):
            cl = source.client(timeout=10)
            i = 0
            while not stop.is_set():
                jid = "load-%d-%06d" % (n, i)
                i += 1
                if cl.add(TYPE, jid, {"i": i}).status == 200:
                    with lock:
                        added.append(jid)
                        if len(added) >= 200:
                            enough.set()

        threads = [threading.Thread(target=producer, args=(n,)) for n in range(2)]
        for t in threads:
            t.start()
        try:
            self.assertTrue(enough.wait(30), "the producers added fewer than 200 jobs in 30 s")
            with lock:
                acked_before = list(added)
            dest = os.path.join(self.tmp, "copy-" + durability if durability else "copy-sync")
            r = kvq_backup(dest, "--data", source.data_dir, "--json")
        finally:
            stop.set()
            for t in threads:
                t.join()
        self.assertEqual(r.returncode, 0, r.stderr)
        report = json.loads(r.stdout)
        self.assertEqual(report["bytes"], os.path.getsize(os.path.join(dest, "data.mdb")))
        self.assertTrue(report["compact"])
        self.assertEqual(os.listdir(dest), ["data.mdb"])
        with lock:
            self.assertGreater(len(added), len(acked_before),
                               "no add was acknowledged during the backup: it ran under no load")

        restored = KvqServer(data_dir=dest, durability=durability).start()
        self.addCleanup(restored.cleanup)
        rc = restored.client(timeout=10)
        self.assertEqual(rc.get("/v1/types/%s" % TYPE).json["timeout"], 30)
        for jid in acked_before:
            self.assertEqual(rc.job(TYPE, jid).status, 200, "%s was acknowledged before the backup began" % jid)
        accepted_ids = {job["id"] for job in accepted}
        for jid in ("job-%02d" % i for i in range(40)):
            if jid not in accepted_ids:
                self.assertEqual(rc.job(TYPE, jid).json["state"], "pending", jid)
        for job in finished:
            got = rc.job(TYPE, job["id"]).json
            self.assertEqual(got["state"], "finished")
            self.assertEqual(got["data"], {"result": job["id"]})
        for job in running:
            self.assertEqual(rc.job(TYPE, job["id"]).json["state"], "running")
            r = rc.post("/v1/jobs/%s/%s/finish" % (TYPE, q(job["id"])),
                        {"lock": job["lock"], "data": {"after": "restore"}})
            self.assertEqual(r.status, 200, r)
        self.assertEqual(rc.add(TYPE, "after-restore", {}).status, 200)
        # The source is untouched by either.
        self.assertEqual(c.job(TYPE, "after-restore").status, 404)
        self.assertEqual(c.job(TYPE, running[0]["id"]).json["state"], "running")

    def test_a_backup_of_a_sync_server_under_load_restores(self):
        self.check_backup_under_load(None)  # kvq serve's default: sync

    def test_a_backup_of_a_nosync_server_under_load_restores(self):
        self.check_backup_under_load("nosync")

    def test_bad_arguments_are_clear_errors_that_change_nothing(self):
        r = kvq_backup(os.path.join(self.tmp, "x"), "--data", os.path.join(self.tmp, "none"))
        self.assertEqual(r.returncode, 5, r.stderr)
        self.assertIn("no kvq data directory", r.stderr)
        self.assertFalse(os.path.exists(os.path.join(self.tmp, "none")))
        self.assertFalse(os.path.exists(os.path.join(self.tmp, "x")))

        server = KvqServer().start()
        server.stop()
        self.addCleanup(server.cleanup)
        taken = os.path.join(self.tmp, "taken")
        os.mkdir(taken)
        with open(os.path.join(taken, "notes.txt"), "w") as f:
            f.write("mine")
        r = kvq_backup(taken, "--data", server.data_dir)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("is not empty", r.stderr)
        self.assertEqual(os.listdir(taken), ["notes.txt"])

        r = kvq_backup("--data", server.data_dir)
        self.assertEqual(r.returncode, 2)
        self.assertIn("usage: kvq backup", r.stderr)
        r = kvq_backup(os.path.join(self.tmp, "y"), "--data", server.data_dir, "--url", "http://h")
        self.assertEqual(r.returncode, 2)
        self.assertFalse(os.path.exists(os.path.join(self.tmp, "y")))

        r = kvq_backup(os.path.join(self.tmp, "z"), "--data", server.data_dir)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertRegex(r.stdout, r"^kvq backup: copied .* to .* \(\d+\.\d KiB, compacted\) in \d+\.\d\d s\n$")


if __name__ == "__main__":
    unittest.main()
