"""Several `kvq serve` processes on one store, for the tests of what must hold across servers
(flow control, schedules, groups): on one LMDB data directory, or on one single-member etcd."""

from kvq_server import KvqServer, uniq
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
