"""kill -9 under load with durability sync: acknowledged work survives, nothing is
finished twice, and everything left over drains after a restart."""

import collections
import http.client
import threading
import time
import unittest

from kvq_server import KvqServer, note, q, wait_until

TYPE = "crash"


class CrashUnderLoad(unittest.TestCase):

    def setUp(self):
        self.server = KvqServer(durability=None).start()  # default durability: sync
        self.addCleanup(self.server.cleanup)

    def test_kill9_loses_no_acknowledged_add_or_finish(self):
        s = self.server
        c = s.client(timeout=5)
        store = c.get("/healthz").json["store"]
        self.assertTrue(store.endswith("(durable)"), store)
        # short job timeout so jobs running at the crash come back quickly after it
        c.set_timeout(TYPE, 2)

        added = []                      # ids whose add returned 200
        finished = []                   # (id, lock) whose finish returned 200
        lock = threading.Lock()
        stop = threading.Event()

        def producer(n):
            cl = s.client(timeout=5)
            i = 0
            while not stop.is_set():
                jid = "p%d-%06d" % (n, i)
                i += 1
                try:
                    r = cl.add(TYPE, jid, {"n": i})
                except (OSError, http.client.HTTPException):
                    time.sleep(0.02)
                    continue
                if r.status == 200:
                    with lock:
                        added.append(jid)

        def worker():
            cl = s.client(timeout=5)
            while not stop.is_set():
                try:
                    r = cl.post("/v1/accept/%s" % TYPE, {"timeout": 0.5, "count": 5})
                    if r.status != 200:
                        continue
                    for j in r.json["jobs"]:
                        f = cl.post("/v1/jobs/%s/%s/finish" % (TYPE, q(j["id"])),
                                    {"lock": j["lock"], "data": {"done": True}})
                        if f.status == 200:
                            with lock:
                                finished.append((j["id"], j["lock"]))
                except (OSError, http.client.HTTPException):
                    time.sleep(0.02)

        threads = [threading.Thread(target=producer, args=(n,), daemon=True) for n in range(2)]
        threads += [threading.Thread(target=worker, daemon=True) for _ in range(2)]
        for th in threads:
            th.start()
        wait_until(lambda: len(added) >= 20 and len(finished) >= 10, 10, 0.05,
                   "load to get going")
        time.sleep(1.5)                 # ~1.5 s of load, then the crash, mid-load
        s.kill()
        time.sleep(0.5)                 # clients now fail against a dead server
        stop.set()
        for th in threads:
            th.join(10)
        self.assertFalse(any(th.is_alive() for th in threads))

        # at most one successful finish per job (we never re-add an id)
        counts = collections.Counter(jid for jid, _ in finished)
        twice = {jid: n for jid, n in counts.items() if n > 1}
        self.assertEqual(twice, {}, "jobs finished successfully more than once")

        note("crash: %d adds and %d finishes acknowledged before kill -9" % (len(added), len(finished)))
        s2 = KvqServer(data_dir=s.data_dir, durability=None).start()
        self.addCleanup(s2.cleanup)
        c = s2.client(timeout=10)

        def all_jobs():
            out, cursor = {}, ""
            while True:
                path = "/v1/jobs/%s?limit=10000" % TYPE + ("&cursor=" + q(cursor) if cursor else "")
                page = c.get(path)
                self.assertEqual(page.status, 200, page)
                for j in page.json["jobs"]:
                    out[j["id"]] = j
                cursor = page.json["next_cursor"]
                if not cursor:
                    return out

        jobs = all_jobs()
        lost = [jid for jid in added if jid not in jobs]
        self.assertEqual(lost, [], "%d of %d acknowledged adds lost" % (len(lost), len(added)))
        unfinished = [jid for jid, _ in finished if jobs[jid]["state"] != "finished"]
        self.assertEqual(unfinished, [], "acknowledged finishes lost: %r" %
                         [jobs[j] for j in unfinished[:5]])

        # drain: jobs running at the crash come back after the 2 s timeout
        deadline = time.monotonic() + 30
        while True:
            r = c.post("/v1/accept/%s" % TYPE, {"timeout": 0.5, "count": 100})
            if r.status == 200:
                for j in r.json["jobs"]:
                    f = c.post("/v1/jobs/%s/%s/finish" % (TYPE, q(j["id"])), {"lock": j["lock"]})
                    self.assertEqual(f.status, 200, f)
            else:
                self.assertEqual(r.status, 204, r)
                left = [j for j in all_jobs().values() if j["state"] != "finished"]
                if not left:
                    break
                self.assertLess(time.monotonic(), deadline,
                                "jobs not drained after restart: %r" % left[:5])
        jobs = all_jobs()
        note("crash: %d jobs after restart, all finished" % len(jobs))
        self.assertTrue(all(j["state"] == "finished" for j in jobs.values()))
        self.assertTrue(set(added) <= set(jobs))

    def test_kill9_keeps_an_acknowledged_batch_add_and_resubmit(self):
        # Both answer from an asynchronous commit's callback, which must come after the commit
        # (kill -9 keeps the page cache, so this checks the order, not the fsync).
        s = self.server
        c = s.client(timeout=5)
        c.set_timeout(TYPE, 60)
        batch = [{"id": "b%03d" % i, "data": {"i": i}} for i in range(50)]
        self.assertEqual(c.post("/v1/jobs/%s/batch" % TYPE, {"jobs": batch}).json, {"added": 50, "kept": []})
        r = c.post("/v1/accept/%s" % TYPE, {"timeout": 1})
        self.assertEqual(r.status, 200, r)
        job = r.json["jobs"][0]
        r = c.post("/v1/jobs/%s/%s/resubmit" % (TYPE, q(job["id"])), {"lock": job["lock"], "data": {"again": 1}})
        self.assertEqual(r.status, 200, r)
        s.kill()
        s2 = KvqServer(data_dir=s.data_dir, durability=None).start()
        self.addCleanup(s2.cleanup)
        c = s2.client(timeout=10)
        page = c.get("/v1/jobs/%s?limit=100" % TYPE).json["jobs"]
        self.assertEqual(sorted(j["id"] for j in page), [b["id"] for b in batch])
        again = c.get("/v1/jobs/%s/%s" % (TYPE, q(job["id"]))).json
        self.assertEqual((again["state"], again["resubmitted"], again["data"]), ("running", True, {"again": 1}))


    def test_kill9_after_a_batchs_last_finish_leaves_one_callback(self):
        # A member's end and the callback's add are one transaction: kill -9 the server the
        # moment the last member's finish is sent. After the restart either that finish and the
        # callback both happened, or neither did (the member is still running and comes back
        # after its timeout); finishing it then adds the callback. Either way exactly one
        # callback was fired, with every member counted once.
        s = self.server
        c = s.client(timeout=5)
        c.set_timeout(TYPE, 2)
        c.set_timeout("crash_done", 60)
        r = c.put("/v1/batches/crash-b", {"callback": {"type": "crash_done", "id": "b-done"}})
        self.assertEqual(r.status, 200, r)
        members = ["m%02d" % i for i in range(10)]
        r = c.post("/v1/jobs/%s/batch" % TYPE,
                   {"jobs": [{"id": m, "data": {}, "batch": "crash-b"} for m in members]})
        self.assertEqual(r.status, 200, r)
        self.assertEqual(c.post("/v1/batches/crash-b/seal").status, 200)
        jobs = c.post("/v1/accept/%s" % TYPE, {"timeout": 1, "count": 10}).json["jobs"]
        self.assertEqual(len(jobs), 10)
        for j in jobs[:-1]:
            self.assertEqual(c.post("/v1/jobs/%s/%s/finish" % (TYPE, q(j["id"])),
                                    {"lock": j["lock"]}).status, 200)
        last = jobs[-1]
        conn = http.client.HTTPConnection(c.host, c.port, timeout=5)
        conn.request("POST", "/v1/jobs/%s/%s/finish" % (TYPE, q(last["id"])),
                     body='{"lock": "%s"}' % last["lock"],
                     headers={"Content-Type": "application/json"})
        s.kill()
        conn.close()

        s2 = KvqServer(data_dir=s.data_dir, durability=None).start()
        self.addCleanup(s2.cleanup)
        c = s2.client(timeout=10)
        state = c.get("/v1/jobs/%s/%s" % (TYPE, q(last["id"]))).json["state"]
        note("crash: the last member was %s after the restart" % state)
        if state != "finished":
            self.assertEqual(c.get("/v1/jobs/crash_done/b-done").status, 404,
                             "the callback was added without its member's end")
            got = c.post("/v1/accept/%s" % TYPE, {"timeout": 10}).json["jobs"]
            self.assertEqual([j["id"] for j in got], [last["id"]])
            self.assertEqual(c.post("/v1/jobs/%s/%s/finish" % (TYPE, q(last["id"])),
                                    {"lock": got[0]["lock"]}).status, 200)
        batch = c.get("/v1/batches/crash-b").json
        self.assertEqual((batch["state"], batch["counts"]["succeeded"], batch["counts"]["members"]),
                         ("fired", 10, 10), batch)
        callback = c.get("/v1/jobs/crash_done/b-done").json
        self.assertEqual(callback["data"]["batch"]["succeeded"], 10)
        metrics = c.get("/metrics").body.decode()
        self.assertIn('kvq_batch_callbacks_total{result="fired"} 1\n', metrics,
                      "the callback was fired more than once, or not at all")

if __name__ == "__main__":
    unittest.main()
