"""kvq on a three-member etcd cluster on loopback, with two `kvq serve` processes sharing it:
jobs and wake-ups cross between the servers, and killing the etcd leader (and then a server)
under load loses no acknowledged add and finishes no job twice. Pausing (SIGSTOP) the member a
server talks to leaves that server unable to answer for about a second, not the 5 s request
timeout (issue 17); the longest window is reported with KVQ_E2E_VERBOSE=1."""

import collections
import json
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import unittest
import urllib.request

from kvq_server import KvqServer, note, q, uniq, wait_until


def free_port():
    import socket
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class EtcdCluster:
    """Three etcd members on loopback, started and stopped by the test."""

    def __init__(self, size=3):
        self.dir = tempfile.mkdtemp(prefix="kvq-etcd-")
        self.members = []
        for i in range(size):
            self.members.append({"name": "m%d" % i, "client": free_port(), "peer": free_port(), "proc": None})
        self.initial = ",".join("%s=http://127.0.0.1:%d" % (m["name"], m["peer"]) for m in self.members)

    def endpoints(self):
        return ["127.0.0.1:%d" % m["client"] for m in self.members]

    def start_member(self, m):
        url = "http://127.0.0.1:%d" % m["client"]
        peer = "http://127.0.0.1:%d" % m["peer"]
        if m.get("log"):
            m["log"].close()
        m["log"] = log = open(os.path.join(self.dir, m["name"] + ".log"), "ab")
        m["proc"] = subprocess.Popen(
            ["etcd", "--name", m["name"], "--data-dir", os.path.join(self.dir, m["name"]),
             "--listen-client-urls", url, "--advertise-client-urls", url,
             "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
             "--initial-cluster", self.initial, "--initial-cluster-state", "new",
             "--initial-cluster-token", "kvq-e2e", "--max-txn-ops", "10000",
             "--quota-backend-bytes", str(8 << 30), "--auto-compaction-mode", "revision",
             "--auto-compaction-retention", "100000", "--log-level", "error"],
            stdin=subprocess.DEVNULL, stdout=log, stderr=log)

    def start(self):
        for m in self.members:
            self.start_member(m)
        wait_until(lambda: self.leader() is not None, 30, interval=0.1, message="an etcd leader")
        return self

    def status(self, m):
        req = urllib.request.Request("http://127.0.0.1:%d/v3/maintenance/status" % m["client"], data=b"{}",
                                     method="POST")
        try:
            with urllib.request.urlopen(req, timeout=1) as r:
                return json.loads(r.read())
        except Exception:
            return None

    def leader(self):
        """The member that is the Raft leader now, or None."""
        for m in self.members:
            if m["proc"] is None or m["proc"].poll() is not None:
                continue
            s = self.status(m)
            if s and s.get("leader") and s.get("header", {}).get("member_id") == s.get("leader"):
                return m
        return None

    def kill(self, m):
        m["proc"].send_signal(signal.SIGKILL)
        m["proc"].wait()

    def pause(self, m):
        """SIGSTOP, then wait until every thread of the member is stopped: the signal is only
        queued by kill(), and on a loaded machine a member answered a read 1 ms after it."""
        m["proc"].send_signal(signal.SIGSTOP)
        task_dir = "/proc/%d/task" % m["proc"].pid
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            states = []
            for tid in os.listdir(task_dir):
                try:
                    with open(os.path.join(task_dir, tid, "stat")) as f:
                        stat = f.read()
                except FileNotFoundError:
                    continue  # the thread has just exited
                states.append(stat[stat.rindex(")") + 2])
            if states and all(s == "T" for s in states):
                return
            time.sleep(0.001)
        raise AssertionError("etcd member %s did not stop" % m["name"])

    def resume(self, m):
        m["proc"].send_signal(signal.SIGCONT)

    def stop(self):
        for m in self.members:
            if m["proc"] is not None and m["proc"].poll() is None:
                m["proc"].kill()
                m["proc"].wait()
            if m.get("log"):
                m["log"].close()
        shutil.rmtree(self.dir, ignore_errors=True)


@unittest.skipIf(shutil.which("etcd") is None, "Debian's etcd-server is not installed (scripts/install-deps.sh)")
class TwoServersOnOneCluster(unittest.TestCase):

    def setUp(self):
        self.cluster = EtcdCluster().start()
        self.addCleanup(self.cluster.stop)
        store = "etcd://%s/%s" % (",".join(self.cluster.endpoints()), uniq("kvq"))
        self.a = KvqServer(extra_args=["--store", store]).start()
        self.addCleanup(self.a.cleanup)
        self.b = KvqServer(extra_args=["--store", store]).start()
        self.addCleanup(self.b.cleanup)

    def test_jobs_and_wake_ups_cross_between_servers(self):
        a, b = self.a.client(), self.b.client()
        self.assertEqual(a.set_timeout("x", 30).status, 200)
        self.assertEqual(a.add("x", "j1", {"n": 1}).status, 200)
        r = b.accept("x")
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.json["jobs"][0]["id"], "j1")

        # a long-poll on B is woken by an add through A
        got = {}

        def poll():
            started = time.monotonic()
            got["r"] = self.b.client().accept("x", timeout=20)
            got["waited"] = time.monotonic() - started
        t = threading.Thread(target=poll)
        t.start()
        time.sleep(0.3)
        self.assertEqual(a.add("x", "j2", {"n": 2}).status, 200)
        t.join(25)
        self.assertEqual(got["r"].status, 200, got["r"])
        self.assertEqual(got["r"].json["jobs"][0]["id"], "j2")
        self.assertLess(got["waited"], 10)

        # a subscription on A sees a finish made through B
        stream = a.events("/v1/jobs/x/j2/events")
        self.assertEqual(stream.next_event()[1]["state"], "running")
        lock = got["r"].json["jobs"][0]["lock"]
        self.assertEqual(b.post("/v1/jobs/x/j2/finish", {"lock": lock, "data": {"ok": 1}}).status, 200)
        deadline = time.monotonic() + 10
        state = None
        while time.monotonic() < deadline and state != "finished":
            state = stream.next_event()[1].get("state")
        stream.close()
        self.assertEqual(state, "finished")

    def test_healthz_is_unavailable_while_etcd_has_no_quorum(self):
        c = self.a.client()
        self.assertEqual(c.get("/healthz").status, 200)
        lost = self.cluster.members[:2]
        for m in lost:
            self.cluster.kill(m)
        r = c.get("/healthz", timeout=30)  # answered once the store's request times out (5 s)
        self.assertEqual(r.status, 503, r)
        self.assertEqual(r.json["status"], "unavailable")
        self.assertIn("etcd:", r.json["store"])
        self.assertTrue(r.json["message"], r)
        for m in lost:
            self.cluster.start_member(m)
        wait_until(lambda: c.get("/healthz", timeout=30).status == 200, 60, interval=0.5,
                   message="healthz to recover with the quorum")

    def test_killing_the_leader_and_a_server_under_load_loses_nothing(self):
        servers = [self.a, self.b]
        alive = [True, True]
        self.a.client().set_timeout("load", 3)
        added, finishes, add_times = [], collections.Counter(), []
        lock = threading.Lock()
        stop = threading.Event()

        def client_for(i):
            # the first live server from i on: clients fail over as users' would
            for k in range(2):
                j = (i + k) % 2
                if alive[j]:
                    return servers[j].client(timeout=5)
            return None

        def producer():
            n = 0
            while not stop.is_set():
                jid = "p%d" % n
                c = client_for(n)
                n += 1  # a new id each time: adding an id again would run a finished job again
                try:
                    r = c.add("load", jid, {"n": n})
                except Exception:
                    continue  # unanswered: may or may not exist; it is simply not counted
                if r.status == 200:
                    with lock:
                        added.append(jid)
                        add_times.append(time.monotonic())

        done = threading.Event()
        self.addCleanup(done.set)  # a failing test must not leave threads spinning

        def worker(w):
            i = w
            while not done.is_set():
                i += 1
                c = client_for(i)
                try:
                    r = c.accept("load", timeout=1, worker="w%d" % w)
                    if r.status != 200:
                        continue
                    for job in r.json["jobs"]:
                        f = c.post("/v1/jobs/load/%s/finish" % q(job["id"]), {"lock": job["lock"]})
                        if f.status == 200:
                            with lock:
                                finishes[job["id"]] += 1
                except Exception:
                    continue

        def unfinished():
            # Judged from the store: a finish applied by a server killed before it answered is
            # finished without ever being acknowledged.
            c = self.b.client(timeout=5)
            with lock:
                pending = [jid for jid in added if jid not in finishes]
            return [jid for jid in pending if c.job("load", jid).json.get("state") != "finished"]

        threads = [threading.Thread(target=producer, daemon=True)] + \
                  [threading.Thread(target=worker, args=(w,), daemon=True) for w in range(2)]
        for t in threads:
            t.start()
        time.sleep(1.5)
        leader = self.cluster.leader()
        self.assertIsNotNone(leader)
        killed_at = time.monotonic()
        self.cluster.kill(leader)
        time.sleep(3)
        self.cluster.start_member(leader)
        time.sleep(1.5)
        server_killed_at = time.monotonic()
        self.a.kill()
        alive[0] = False
        time.sleep(2)
        stop.set()
        threads[0].join(30)
        # Jobs that were running on a request the killed server never answered come back after
        # the type's 3 s activity timeout; the workers finish them through B.
        wait_until(lambda: not unfinished(), 90, interval=0.5, message="every acknowledged job finished")
        done.set()
        for t in threads:
            t.join(30)

        b = self.b.client()
        for jid in added:
            r = b.job("load", jid)
            self.assertEqual(r.status, 200, "acknowledged add %s is lost: %r" % (jid, r))
            self.assertEqual(r.json["state"], "finished", jid)
        twice = [jid for jid, n in finishes.items() if n > 1]
        self.assertEqual(twice, [], "jobs finished twice")
        # how long writes stalled around the leader's death, and how soon they came back after
        # each kill (an add answered by either server)
        gaps = [t2 - t1 for t1, t2 in zip(add_times, add_times[1:]) if t2 > killed_at - 1]
        stall = max(gaps) if gaps else 0

        def first_add_after(moment):
            later = [t for t in add_times if t > moment]
            return later[0] - moment if later else float("inf")

        note("etcd cluster: %d adds acknowledged, all finished once; longest write stall %.2f s; "
             "first add acknowledged %.2f s after the leader's SIGKILL, %.2f s after server A's"
             % (len(added), stall, first_add_after(killed_at), first_add_after(server_killed_at)))
        self.assertGreater(len(added), 20)
        self.assertLess(stall, 20, "writes stalled for %.1f s after the leader died" % stall)


@unittest.skipIf(shutil.which("etcd") is None, "Debian's etcd-server is not installed (scripts/install-deps.sh)")
class PausedMembers(unittest.TestCase):
    """One server whose endpoint list starts with the two followers, then the leader. The server
    sends its calls to the leader (EtcdOptions::prefer_leader), so a paused follower should cost
    it little, and the paused leader costs kvq's own check plus etcd's election."""

    PAUSE = 3.0  # seconds each follower stays stopped
    # The leader stays stopped longer than a failover takes (kvq's check and etcd's election,
    # about 1.5 s here), so that a server waiting for its resume, or for etcd's own 7-s request
    # timeout, fails the bound below: a follower had forwarded an add to the paused leader and
    # kvq waited for it (3 to 6 s) until the member check learnt to see a new raft term.
    LEADER_PAUSE = 6.0

    def setUp(self):
        self.cluster = EtcdCluster().start()
        self.addCleanup(self.cluster.stop)
        leader = self.cluster.leader()
        self.order = [m for m in self.cluster.members if m is not leader] + [leader]
        endpoints = ",".join("127.0.0.1:%d" % m["client"] for m in self.order)
        self.server = KvqServer(extra_args=["--store", "etcd://%s/%s" % (endpoints, uniq("kvq"))]).start()
        self.addCleanup(self.server.cleanup)

    def test_a_paused_member_leaves_its_server_unable_to_answer_for_about_a_second(self):
        c = self.server.client(timeout=30)
        self.assertEqual(c.set_timeout("p", 30).status, 200)
        answered, acknowledged = [], []  # monotonic times of answered adds; their ids
        # Every add: (sent, returned, outcome), so that a failure shows what the longest gap held.
        calls = []
        stop = threading.Event()
        self.addCleanup(stop.set)

        def producer():
            n = 0
            while not stop.is_set():
                jid = "p%d" % n
                n += 1
                sent = time.monotonic()
                try:
                    r = c.add("p", jid, {"n": n})
                except Exception as e:
                    calls.append((sent, time.monotonic(), "%s: %s" % (type(e).__name__, e)))
                    continue
                outcome = str(r.status) if r.status == 200 else "%d %r" % (r.status, r.body[:200])
                calls.append((sent, time.monotonic(), outcome))
                if r.status == 200:
                    answered.append(time.monotonic())
                    acknowledged.append(jid)

        def calls_between(start, end):
            return "; ".join("sent +%.2f s, took %.2f s: %s" % (a - start, b - a, what)
                             for a, b, what in calls if b >= start and a <= end)

        t = threading.Thread(target=producer, daemon=True)
        t.start()
        wait_until(lambda: len(answered) > 20, 10, message="adds before the first pause")
        windows = []
        for m, role in zip(self.order, ["follower", "follower", "leader"]):
            paused_at = time.monotonic()
            self.cluster.pause(m)
            # the fault's length, not a wait for an event
            time.sleep(self.LEADER_PAUSE if role == "leader" else self.PAUSE)
            self.cluster.resume(m)
            resumed_at = time.monotonic()
            wait_until(lambda: len([a for a in answered if a > resumed_at]) > 10, 20,
                       message="adds after resuming the %s" % role)
            times = [paused_at] + [a for a in answered if a > paused_at]
            window, gap_start = max((b - a, a) for a, b in zip(times, times[1:]))
            windows.append((role, window, calls_between(gap_start, gap_start + window)))
        stop.set()
        t.join(35)
        note("etcd paused members: longest unavailability %s (followers paused %.0f s, the leader %.0f s; "
             "the request timeout is 5 s)"
             % (", ".join("%s %.2f s" % w[:2] for w in windows), self.PAUSE, self.LEADER_PAUSE))
        for role, window, held in windows:
            # A follower costs at most kvq's own check (about 1 s, were the server talking to it;
            # before issue 17 the whole 3 s pause, as the request timeout is longer); the leader
            # adds etcd's election, during which the other members cannot answer either.
            self.assertLess(window, 2.5 if role == "follower" else 4.0,
                            "the server could not answer for %.2f s while a %s was paused; the adds "
                            "in that gap: %s" % (window, role, held))
        for jid in acknowledged:
            r = c.job("p", jid)
            self.assertEqual(r.status, 200, "acknowledged add %s is lost: %r" % (jid, r))


if __name__ == "__main__":
    unittest.main()
