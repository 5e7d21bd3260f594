"""Several `kvq serve` processes on one store, for the tests of what must hold across servers
(flow control, schedules, groups): on one LMDB data directory, or on one single-member etcd."""

import threading

from kvq_server import KvqServer, q, uniq
from test_etcd_cluster import EtcdCluster


def on_one_directory(test, count=3):
    """Starts `count` servers sharing the first one's data directory; `test` stops them."""
    first = KvqServer().start()
    # Cleanups run last-in first-out: the servers sharing its directory stop before it goes.
    test.addCleanup(first.cleanup)
    servers = [first]
    for _ in range(count - 1):
        s = KvqServer(data_dir=first.data_dir).start()
        test.addCleanup(s.cleanup)
        servers.append(s)
    return servers


class OnOneEtcd:
    """A mixin, first among a test class's bases: its servers share one etcd member, started
    once for the class, each test under a key prefix of its own."""

    @classmethod
    def setUpClass(cls):
        cls.etcd = EtcdCluster(size=1).start()

    @classmethod
    def tearDownClass(cls):
        cls.etcd.stop()

    def start_servers(self, count=3):
        store = "etcd://%s/%s" % (",".join(self.etcd.endpoints()), uniq("kvq"))
        servers = []
        for _ in range(count):
            s = KvqServer(extra_args=["--store", store]).start()
            self.addCleanup(s.cleanup)
            servers.append(s)
        return servers


def accept_hold_finish(servers, t, jobs, acceptors, hold, join_timeout):
    """Runs `acceptors` threads, the n-th on a connection of its own to servers[n % len]: each
    accepts one job of type `t` at a time, calls hold(client, job) while it runs it (hold
    returns the error answers it met, if any), then finishes it — until `jobs` are finished
    or an answer was an error. Returns (finished, errors, threads still running)."""
    lock = threading.Lock()
    state = {"done": 0, "errors": []}

    def acceptor(n):
        c = servers[n % len(servers)].client()
        while True:
            with lock:
                if state["done"] >= jobs or state["errors"]:
                    return
            r = c.accept(t, timeout=2)
            if r.status == 204:
                continue
            if r.status != 200:
                with lock:
                    state["errors"].append(r)
                return
            job = r.json["jobs"][0]
            errors = hold(c, job)
            f = c.post("/v1/jobs/%s/%s/finish" % (q(t), q(job["id"])), {"lock": job["lock"]})
            with lock:
                state["errors"].extend(errors or [])
                if f.status != 200:
                    state["errors"].append(f)
                state["done"] += 1

    threads = [threading.Thread(target=acceptor, args=(n,), daemon=True)
               for n in range(acceptors)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(join_timeout)
    return state["done"], state["errors"], [th for th in threads if th.is_alive()]
