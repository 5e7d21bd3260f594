"""beanstalkd's protocol, spoken over raw sockets to `kvq serve --beanstalk-listen`
(docs/beanstalk.md; the protocol: /usr/share/doc/beanstalkd/protocol.txt).

With KVQ_BEANSTALK_TARGET=HOST:PORT the very same tests run against that server instead — a real
beanstalkd (`beanstalkd -l 127.0.0.1 -p PORT`) — to prove that they test the protocol, not kvq.
Where kvq deliberately differs from beanstalkd (durability, tube names, stats fields), the test
says so, and checks kvq's documented behaviour only when the target is kvq.

Every test works in tubes of its own, so the tests share one server.
"""

import os
import re
import socket
import tempfile
import time
import unittest

from kvq_server import KvqServer, uniq

TARGET = os.environ.get("KVQ_BEANSTALK_TARGET")
ON_KVQ = TARGET is None
# How much later than beanstalkd kvq may act on a TTR: its activity monitor checks each job's
# run about four times per timeout (docs/beanstalk.md, "TTR").
TTR_SLACK = 2.0


class Conn:
    """One client connection: send command lines, read replies."""

    def __init__(self, address, timeout=20):
        host, _, port = address.rpartition(":")
        self.sock = socket.create_connection((host.strip("[]"), int(port)), timeout=timeout)
        self.buf = b""

    def close(self):
        self.sock.close()

    def send(self, data):
        self.sock.sendall(data)

    def _fill(self):
        data = self.sock.recv(65536)
        if not data:
            raise ConnectionError("the server closed the connection")
        self.buf += data

    def line(self):
        while b"\r\n" not in self.buf:
            self._fill()
        out, _, self.buf = self.buf.partition(b"\r\n")
        return out.decode()

    def chunk(self, size):
        while len(self.buf) < size + 2:
            self._fill()
        data, rest = self.buf[:size], self.buf[size:]
        assert rest[:2] == b"\r\n", rest[:10]
        self.buf = rest[2:]
        return data

    def cmd(self, text, body=None):
        data = text.encode() + b"\r\n"
        if body is not None:
            data += body + b"\r\n"
        self.send(data)
        return self.line()

    def put(self, body=b"x", pri=0, delay=0, ttr=60):
        reply = self.cmd("put %d %d %d %d" % (pri, delay, ttr, len(body)), body)
        m = re.fullmatch(r"INSERTED (\d+)", reply)
        assert m, reply
        return int(m.group(1))

    def job(self, text):
        """A command answered by RESERVED/FOUND <id> <bytes> and a body: (word, id, body), or
        (reply line, None, None)."""
        reply = self.cmd(text)
        m = re.fullmatch(r"(RESERVED|FOUND) (\d+) (\d+)", reply)
        if not m:
            return reply, None, None
        return m.group(1), int(m.group(2)), self.chunk(int(m.group(3)))

    def yaml(self, text):
        """A command answered by OK <bytes> and YAML: a dict, or a list, or the reply line."""
        reply = self.cmd(text)
        m = re.fullmatch(r"OK (\d+)", reply)
        if not m:
            return reply
        doc = self.chunk(int(m.group(1))).decode()
        lines = doc.split("\n")
        assert lines[0] == "---", doc
        assert doc.endswith("\n"), doc
        lines = [l for l in lines[1:] if l]
        if all(l.startswith("- ") for l in lines) and lines:
            return [l[2:] for l in lines]
        out = {}
        for l in lines:
            key, sep, value = l.partition(": ")
            assert sep, l
            out[key] = value
        return out

    def closed(self, wait=5):
        """True once the server has closed the connection (within `wait` seconds)."""
        self.sock.settimeout(wait)
        try:
            return self.sock.recv(1) == b""
        except socket.timeout:
            return False
        except ConnectionError:
            return True


class BeanstalkProtocolTest(unittest.TestCase):
    # relaxed: commands run on the I/O threads; durable: on the worker pool (docs/beanstalk.md).
    durability = "relaxed"

    @classmethod
    def setUpClass(cls):
        cls.server = None
        if ON_KVQ:
            cls.server = KvqServer(durability=cls.durability,
                                   extra_args=["--beanstalk-listen", "127.0.0.1:0",
                                               "--beanstalk-max-job-size", "1000"]).start()
            cls.address = cls.server.beanstalk_address
            assert cls.address, "kvq serve did not announce the beanstalkd address"
        else:
            cls.address = TARGET

    @classmethod
    def tearDownClass(cls):
        if cls.server:
            cls.server.cleanup()

    def conn(self, tube=None):
        """A connection using and watching only `tube` (a fresh one if None)."""
        c = Conn(self.address)
        self.addCleanup(c.close)
        tube = tube or uniq("tube")
        self.assertEqual(c.cmd("use " + tube), "USING " + tube)
        self.assertEqual(c.cmd("watch " + tube), "WATCHING 2")
        self.assertEqual(c.cmd("ignore default"), "WATCHING 1")
        c.tube = tube
        return c

    # -- producing and consuming -----------------------------------------------------------
    def test_put_reserve_delete(self):
        c = self.conn()
        jid = c.put(b"hello")
        self.assertEqual(c.job("reserve"), ("RESERVED", jid, b"hello"))
        self.assertEqual(c.cmd("delete %d" % jid), "DELETED")
        self.assertEqual(c.cmd("delete %d" % jid), "NOT_FOUND")
        self.assertEqual(c.job("reserve-with-timeout 0")[0], "TIMED_OUT")

    def test_bodies_are_bytes_kept_exactly(self):
        c = self.conn()
        body = bytes(range(256)) + b"\r\n\x00end"
        jid = c.put(body)
        self.assertEqual(c.job("reserve-with-timeout 5"), ("RESERVED", jid, body))
        empty = c.put(b"")
        self.assertEqual(c.job("peek %d" % empty), ("FOUND", empty, b""))

    def test_ids_are_distinct_and_name_no_tube(self):
        a, b = self.conn(), self.conn()
        ids = [a.put(), b.put(), a.put()]
        self.assertEqual(len(set(ids)), 3)
        # delete <id> from a connection using another tube: ids are global.
        self.assertEqual(a.cmd("delete %d" % ids[1]), "DELETED")

    def test_reserve_takes_the_best_priority_across_every_watched_tube(self):
        p = self.conn()
        first, second = p.tube, uniq("tube")
        low = p.put(b"a10", pri=10)
        self.assertEqual(p.cmd("use " + second), "USING " + second)
        mid = p.put(b"b5", pri=5)
        p.cmd("use " + first)
        high = p.put(b"a1", pri=1)
        last = p.put(b"a4294967295", pri=4294967295)
        w = self.conn(first)
        self.assertEqual(w.cmd("watch " + second), "WATCHING 2")
        got = [w.job("reserve-with-timeout 5")[1] for _ in range(4)]
        self.assertEqual(got, [high, mid, low, last])

    def test_within_a_priority_the_first_put_goes_first(self):
        c = self.conn()
        ids = [c.put(b"%d" % i, pri=3) for i in range(5)]
        self.assertEqual([c.job("reserve-with-timeout 5")[1] for _ in ids], ids)

    def test_a_waiting_reserve_gets_a_job_put_later(self):
        w = self.conn()
        p = self.conn(w.tube)
        w.send(b"reserve\r\n")
        time.sleep(0.3)
        jid = p.put(b"late")
        m = re.fullmatch(r"RESERVED (\d+) 4", w.line())
        self.assertTrue(m)
        self.assertEqual(int(m.group(1)), jid)
        self.assertEqual(w.chunk(4), b"late")

    def test_delayed_jobs_become_ready_when_their_delay_passes(self):
        c = self.conn()
        start = time.monotonic()
        jid = c.put(b"later", delay=2)
        self.assertEqual(c.job("reserve-with-timeout 0")[0], "TIMED_OUT")
        self.assertEqual(c.yaml("stats-job %d" % jid)["state"], "delayed")
        self.assertEqual(c.job("peek-delayed"), ("FOUND", jid, b"later"))
        self.assertEqual(c.job("peek-ready")[0], "NOT_FOUND")
        self.assertEqual(c.job("reserve-with-timeout 10")[1], jid)
        self.assertGreaterEqual(time.monotonic() - start, 1.5)

    def test_reserve_with_timeout_times_out(self):
        c = self.conn()
        start = time.monotonic()
        self.assertEqual(c.cmd("reserve-with-timeout 1"), "TIMED_OUT")
        self.assertGreaterEqual(time.monotonic() - start, 0.9)

    def test_reserve_job_takes_a_job_by_id(self):
        c = self.conn()
        first, second = c.put(b"1"), c.put(b"2")
        self.assertEqual(c.job("reserve-job %d" % second), ("RESERVED", second, b"2"))
        other = self.conn(c.tube)
        self.assertEqual(other.cmd("reserve-job %d" % second), "NOT_FOUND")
        self.assertEqual(other.cmd("reserve-job 99999999999"), "NOT_FOUND")
        self.assertEqual(other.job("reserve-with-timeout 5")[1], first)

    # -- TTR -------------------------------------------------------------------------------
    def test_a_reserved_job_not_touched_comes_back_after_its_ttr(self):
        c = self.conn()
        jid = c.put(b"slow", ttr=2)
        self.assertEqual(c.job("reserve")[1], jid)
        other = self.conn(c.tube)
        start = time.monotonic()
        self.assertEqual(other.job("reserve-with-timeout %d" % (2 + 5)), ("RESERVED", jid, b"slow"))
        waited = time.monotonic() - start
        self.assertGreaterEqual(waited, 1.5)
        self.assertLess(waited, 2 + TTR_SLACK)
        # Fencing: the first connection lost it.
        for command in ("touch %d", "release %d 0 0", "bury %d 0", "delete %d"):
            self.assertEqual(c.cmd(command % jid), "NOT_FOUND", command)
        stats = other.yaml("stats-job %d" % jid)
        self.assertEqual(stats["state"], "reserved")
        self.assertEqual(stats["reserves"], "2")
        self.assertEqual(stats["timeouts"], "1")
        self.assertEqual(other.cmd("delete %d" % jid), "DELETED")

    def test_a_job_reserved_before_its_delay_ended_is_ready_once_its_ttr_runs_out(self):
        # beanstalkd: a reserved job whose TTR runs out is ready at once, whatever delay it had.
        c = self.conn()
        jid = c.put(b"early", delay=300, ttr=2)
        self.assertEqual(c.job("reserve-job %d" % jid), ("RESERVED", jid, b"early"))
        other = self.conn(c.tube)
        start = time.monotonic()
        self.assertEqual(other.job("reserve-with-timeout %d" % (2 + 5)), ("RESERVED", jid, b"early"))
        self.assertLess(time.monotonic() - start, 2 + TTR_SLACK)
        self.assertEqual(other.yaml("stats-job %d" % jid)["timeouts"], "1")
        self.assertEqual(other.cmd("release %d 0 0" % jid), "RELEASED")
        self.assertEqual(other.yaml("stats-job %d" % jid)["state"], "ready")

    def test_touch_keeps_a_job_past_its_ttr(self):
        c = self.conn()
        jid = c.put(b"long", ttr=2)
        self.assertEqual(c.job("reserve")[1], jid)
        other = self.conn(c.tube)
        for _ in range(4):
            time.sleep(0.7)
            self.assertEqual(c.cmd("touch %d" % jid), "TOUCHED")
        self.assertEqual(other.cmd("reserve-with-timeout 0"), "TIMED_OUT")
        self.assertEqual(c.cmd("delete %d" % jid), "DELETED")

    def test_deadline_soon_in_the_last_second_of_a_ttr(self):
        c = self.conn()
        jid = c.put(b"d", ttr=2)
        self.assertEqual(c.job("reserve")[1], jid)
        start = time.monotonic()
        # Waiting for another job, the safety margin arrives.
        self.assertEqual(c.cmd("reserve-with-timeout 10"), "DEADLINE_SOON")
        waited = time.monotonic() - start
        # When the last second of the 2 s TTR begins: after about 1 s, before the TTR runs out.
        self.assertGreaterEqual(waited, 0.5)
        self.assertLess(waited, 2.0)
        # Inside the margin, a reserve answers at once.
        self.assertEqual(c.cmd("reserve-with-timeout 0"), "DEADLINE_SOON")
        self.assertEqual(c.cmd("reserve"), "DEADLINE_SOON")
        self.assertEqual(c.cmd("touch %d" % jid), "TOUCHED")
        self.assertEqual(c.cmd("reserve-with-timeout 0"), "TIMED_OUT")
        self.assertEqual(c.cmd("delete %d" % jid), "DELETED")

    def test_ttr_zero_is_one_second(self):
        c = self.conn()
        jid = c.put(ttr=0)
        self.assertEqual(c.yaml("stats-job %d" % jid)["ttr"], "1")
        self.assertEqual(c.job("reserve")[1], jid)
        self.assertEqual(c.cmd("reserve-with-timeout 0"), "DEADLINE_SOON")

    # -- connections -----------------------------------------------------------------------
    def test_a_closed_connections_jobs_are_released_at_once(self):
        c = self.conn()
        jid = c.put(b"held", ttr=120)
        self.assertEqual(c.job("reserve")[1], jid)
        other = self.conn(c.tube)
        self.assertEqual(other.cmd("reserve-with-timeout 0"), "TIMED_OUT")
        c.close()
        start = time.monotonic()
        self.assertEqual(other.job("reserve-with-timeout 10"), ("RESERVED", jid, b"held"))
        self.assertLess(time.monotonic() - start, 2)

    def test_a_client_closing_during_a_reserve_takes_no_job(self):
        w = self.conn()
        w.send(b"reserve\r\n")
        time.sleep(0.3)
        w.close()
        time.sleep(0.3)
        p = self.conn(w.tube)
        jid = p.put(b"for the living")
        self.assertEqual(p.job("reserve-with-timeout 5")[1], jid)

    def test_quit_closes_the_connection(self):
        c = self.conn()
        c.send(b"quit\r\n")
        self.assertTrue(c.closed())

    # -- release, bury, kick ---------------------------------------------------------------
    def test_release_sets_priority_and_delay(self):
        c = self.conn()
        jid = c.put(b"r", pri=100)
        self.assertEqual(c.job("reserve")[1], jid)
        self.assertEqual(c.cmd("release %d 7 1" % jid), "RELEASED")
        stats = c.yaml("stats-job %d" % jid)
        self.assertEqual((stats["state"], stats["pri"], stats["releases"]), ("delayed", "7", "1"))
        self.assertEqual(c.cmd("reserve-with-timeout 0"), "TIMED_OUT")
        self.assertEqual(c.job("reserve-with-timeout 5")[1], jid)
        self.assertEqual(c.cmd("release %d 7 0" % jid), "RELEASED")
        self.assertEqual(c.yaml("stats-job %d" % jid)["state"], "ready")

    def test_bury_and_kick(self):
        c = self.conn()
        jid = c.put(b"b", pri=50)
        self.assertEqual(c.job("reserve")[1], jid)
        self.assertEqual(c.cmd("bury %d 3" % jid), "BURIED")
        stats = c.yaml("stats-job %d" % jid)
        self.assertEqual((stats["state"], stats["pri"], stats["buries"]), ("buried", "3", "1"))
        self.assertEqual(c.job("peek-buried"), ("FOUND", jid, b"b"))
        self.assertEqual(c.cmd("reserve-with-timeout 0"), "TIMED_OUT")
        self.assertEqual(c.yaml("stats-tube " + c.tube)["current-jobs-buried"], "1")
        self.assertEqual(c.cmd("kick 10"), "KICKED 1")
        self.assertEqual(c.job("peek-buried")[0], "NOT_FOUND")
        self.assertEqual(c.job("reserve-with-timeout 5")[1], jid)
        self.assertEqual(c.cmd("bury %d 3" % jid), "BURIED")
        self.assertEqual(c.cmd("kick-job %d" % jid), "KICKED")
        self.assertEqual(c.cmd("kick-job %d" % jid), "NOT_FOUND")  # ready: not kickable
        self.assertEqual(c.yaml("stats-job %d" % jid)["state"], "ready")

    def test_kick_takes_buried_jobs_first_then_delayed_ones(self):
        c = self.conn()
        delayed = [c.put(delay=300) for _ in range(3)]
        buried = c.put()
        self.assertEqual(c.job("reserve")[1], buried)
        self.assertEqual(c.cmd("bury %d 0" % buried), "BURIED")
        self.assertEqual(c.cmd("kick 5"), "KICKED 1")
        self.assertEqual(c.cmd("kick 2"), "KICKED 2")
        self.assertEqual(c.cmd("kick 0"), "KICKED 0")
        self.assertEqual(c.cmd("kick 100"), "KICKED 1")
        self.assertEqual(c.cmd("kick 100"), "KICKED 0")
        self.assertEqual(c.yaml("stats-tube " + c.tube)["current-jobs-ready"], "4")
        lone = c.put(delay=300)
        self.assertEqual(c.cmd("kick-job %d" % lone), "KICKED")
        self.assertEqual(c.yaml("stats-job %d" % lone)["state"], "ready")
        del delayed

    def test_every_kick_counts_in_the_jobs_kicks(self):
        c = self.conn()
        buried, delayed = c.put(b"b"), c.put(b"d", delay=300)
        self.assertEqual(c.job("reserve")[1], buried)
        self.assertEqual(c.cmd("bury %d 0" % buried), "BURIED")
        self.assertEqual(c.cmd("kick 10"), "KICKED 1")
        self.assertEqual(c.yaml("stats-job %d" % buried)["kicks"], "1")
        self.assertEqual(c.job("reserve")[1], buried)
        self.assertEqual(c.cmd("bury %d 0" % buried), "BURIED")
        self.assertEqual(c.cmd("kick-job %d" % buried), "KICKED")
        self.assertEqual(c.yaml("stats-job %d" % buried)["kicks"], "2")
        self.assertEqual(c.cmd("kick 10"), "KICKED 1")  # no buried job left: the delayed one
        stats = c.yaml("stats-job %d" % delayed)
        self.assertEqual((stats["state"], stats["kicks"]), ("ready", "1"))
        self.assertEqual(c.yaml("stats-job %d" % buried)["kicks"], "2")

    def test_kick_takes_as_many_buried_jobs_as_it_is_given(self):
        # More than one of kvq's rerun transactions takes (128): kick goes on until none is left.
        c = self.conn()
        count = 150
        for _ in range(count):
            c.put()
        for _ in range(count):
            jid = c.job("reserve-with-timeout 5")[1]
            self.assertEqual(c.cmd("bury %d 0" % jid), "BURIED")
        self.assertEqual(c.cmd("kick 140"), "KICKED 140")
        self.assertEqual(c.cmd("kick 1000"), "KICKED 10")
        self.assertEqual(c.yaml("stats-tube " + c.tube)["current-jobs-ready"], str(count))

    def test_delete_of_ready_delayed_and_buried_jobs_from_any_connection(self):
        c = self.conn()
        ready, delayed, buried = c.put(pri=5), c.put(delay=300), c.put(pri=1)
        self.assertEqual(c.job("reserve")[1], buried)
        self.assertEqual(c.cmd("bury %d 0" % buried), "BURIED")
        other = Conn(self.address)
        self.addCleanup(other.close)
        for jid in (ready, delayed, buried):
            self.assertEqual(other.cmd("delete %d" % jid), "DELETED")
            self.assertEqual(other.cmd("peek %d" % jid), "NOT_FOUND")

    # -- fencing ---------------------------------------------------------------------------
    def test_only_the_reserving_connection_may_act_on_a_reserved_job(self):
        c = self.conn()
        jid = c.put()
        self.assertEqual(c.job("reserve")[1], jid)
        other = self.conn(c.tube)
        for command in ("touch %d", "release %d 0 0", "bury %d 0", "delete %d"):
            self.assertEqual(other.cmd(command % jid), "NOT_FOUND", command)
        self.assertEqual(c.yaml("stats-job %d" % jid)["state"], "reserved")
        self.assertEqual(c.cmd("touch %d" % jid), "TOUCHED")
        self.assertEqual(c.cmd("delete %d" % jid), "DELETED")

    def test_commands_on_a_job_not_reserved_answer_not_found(self):
        c = self.conn()
        jid = c.put()
        for command in ("touch %d", "release %d 0 0", "bury %d 0"):
            self.assertEqual(c.cmd(command % jid), "NOT_FOUND", command)
        for command in ("touch", "release %d 0 0", "bury %d 0", "delete", "peek", "stats-job",
                        "kick-job"):
            text = command % 99999999999 if "%" in command else command + " 99999999999"
            self.assertEqual(c.cmd(text), "NOT_FOUND", text)

    # -- peek ------------------------------------------------------------------------------
    def test_peek_commands(self):
        c = self.conn()
        for command in ("peek-ready", "peek-delayed", "peek-buried"):
            self.assertEqual(c.cmd(command), "NOT_FOUND", command)
        a = c.put(b"a", pri=5)
        b = c.put(b"b", pri=2)
        d = c.put(b"d", delay=100)
        e = c.put(b"e", delay=50)
        self.assertEqual(c.job("peek-ready"), ("FOUND", b, b"b"))
        self.assertEqual(c.job("peek-delayed"), ("FOUND", e, b"e"))
        self.assertEqual(c.job("peek %d" % a), ("FOUND", a, b"a"))
        self.assertEqual(c.job("peek %d" % d), ("FOUND", d, b"d"))
        # peek-* look at the used tube only.
        other = self.conn()
        self.assertEqual(other.cmd("peek-ready"), "NOT_FOUND")

    # -- tubes -----------------------------------------------------------------------------
    def test_use_watch_ignore_and_the_lists(self):
        c = Conn(self.address)
        self.addCleanup(c.close)
        self.assertEqual(c.cmd("list-tube-used"), "USING default")
        self.assertEqual(c.yaml("list-tubes-watched"), ["default"])
        self.assertEqual(c.cmd("ignore default"), "NOT_IGNORED")
        a, b = uniq("tube"), uniq("tube")
        self.assertEqual(c.cmd("use " + a), "USING " + a)
        self.assertEqual(c.cmd("list-tube-used"), "USING " + a)
        self.assertEqual(c.cmd("watch " + b), "WATCHING 2")
        self.assertEqual(c.cmd("watch " + b), "WATCHING 2")
        self.assertEqual(c.yaml("list-tubes-watched"), ["default", b])
        self.assertEqual(c.cmd("ignore " + uniq("never")), "WATCHING 2")
        self.assertEqual(c.cmd("ignore default"), "WATCHING 1")
        self.assertEqual(c.cmd("ignore " + b), "NOT_IGNORED")
        self.assertEqual(c.yaml("list-tubes-watched"), [b])
        tubes = c.yaml("list-tubes")
        self.assertIn("default", tubes)
        self.assertIn(a, tubes)
        self.assertIn(b, tubes)

    def test_every_name_character_works_in_a_tube(self):
        tube = "a+b/c;d$e(f)_g.h-%d" % os.getpid()
        c = self.conn(tube)
        jid = c.put(b"odd name")
        self.assertEqual(c.yaml("stats-job %d" % jid)["tube"], tube)
        self.assertEqual(c.job("reserve-with-timeout 5")[1], jid)
        self.assertIn(tube, c.yaml("list-tubes"))
        self.assertEqual(c.cmd("delete %d" % jid), "DELETED")

    def test_a_tube_name_may_have_200_bytes(self):
        tube = uniq("long")
        tube += "x" * (200 - len(tube))
        c = self.conn(tube)
        jid = c.put(b"long name")
        self.assertEqual(c.yaml("stats-job %d" % jid)["tube"], tube)
        self.assertEqual(c.yaml("stats-tube " + tube)["current-jobs-ready"], "1")
        self.assertIn(tube, c.yaml("list-tubes"))
        self.assertEqual(c.job("reserve-with-timeout 5"), ("RESERVED", jid, b"long name"))
        self.assertEqual(c.cmd("delete %d" % jid), "DELETED")
        self.assertEqual(c.cmd("pause-tube %s 1" % tube), "PAUSED")  # a line of 213 bytes
        self.assertEqual(c.cmd("use " + tube + "y"), "BAD_FORMAT")

    @unittest.skipUnless(ON_KVQ, "kvq's tubes are job types, reachable over HTTP")
    def test_a_tube_is_a_job_type_over_http(self):
        tube = "web+api/%d" % os.getpid()
        c = self.conn(tube)
        jid = c.put(b"\x00\x01 bytes")
        http = self.server.client()
        jtype = "web:2Bapi:2F%d" % os.getpid()
        r = http.job(jtype, str(jid))
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.json["state"], "pending")
        self.assertEqual(r.json["priority"], 0)

    @unittest.skipUnless(ON_KVQ, "kvq's tubes are job types, which HTTP may delete")
    def test_a_put_makes_its_tubes_type_again_once_deleted_over_http(self):
        tube = uniq("tube")
        c = self.conn(tube)
        self.assertEqual(c.cmd("delete %d" % c.put()), "DELETED")
        http = self.server.client()
        r = http.delete("/v1/types/%s" % tube)
        self.assertEqual(r.status, 200, r)
        jid = c.put(b"again")
        self.assertEqual(c.job("reserve-with-timeout 5"), ("RESERVED", jid, b"again"))
        self.assertEqual(http.get("/v1/types/%s" % tube).json["max_attempts"], 1000000)

    def test_pause_tube_holds_reserves_until_it_ends(self):
        c = self.conn()
        jid = c.put()
        self.assertEqual(c.cmd("pause-tube %s 2" % c.tube), "PAUSED")
        stats = c.yaml("stats-tube " + c.tube)
        self.assertEqual(stats["pause"], "2")
        self.assertIn(stats["pause-time-left"], ("1", "2"))
        self.assertEqual(stats["cmd-pause-tube"], "1")
        self.assertEqual(c.cmd("reserve-with-timeout 0"), "TIMED_OUT")
        start = time.monotonic()
        self.assertEqual(c.job("reserve-with-timeout 10")[1], jid)
        self.assertGreaterEqual(time.monotonic() - start, 1.0)
        self.assertEqual(c.cmd("pause-tube %s 1" % uniq("never")), "NOT_FOUND")

    # -- stats -----------------------------------------------------------------------------
    def test_stats_tube_counts_jobs_by_state(self):
        c = self.conn()
        c.put(pri=1)
        c.put(pri=2)
        c.put(delay=300)
        reserved = c.put(pri=0)
        self.assertEqual(c.job("reserve")[1], reserved)
        stats = c.yaml("stats-tube " + c.tube)
        self.assertEqual(stats["name"], c.tube)
        expected = {"current-jobs-ready": "2", "current-jobs-reserved": "1",
                    "current-jobs-delayed": "1", "current-jobs-buried": "0",
                    "total-jobs": "4", "current-using": "1", "current-watching": "1",
                    "current-waiting": "0", "cmd-delete": "0", "pause": "0",
                    "pause-time-left": "0"}
        for key, value in expected.items():
            self.assertEqual(stats[key], value, key)
        self.assertEqual(c.yaml("stats-tube " + uniq("never")), "NOT_FOUND")

    def test_stats_count_ready_jobs_under_priority_1024_as_urgent(self):
        c = self.conn()
        reserved = c.put(pri=0)
        self.assertEqual(c.job("reserve")[1], reserved)
        buried = c.put(pri=0)
        self.assertEqual(c.job("reserve")[1], buried)
        self.assertEqual(c.cmd("bury %d 7" % buried), "BURIED")
        for pri in (0, 1023, 1024, 5000):
            c.put(pri=pri)
        c.put(pri=1, delay=300)
        stats = c.yaml("stats-tube " + c.tube)
        self.assertEqual((stats["current-jobs-urgent"], stats["current-jobs-ready"]), ("2", "4"))
        self.assertGreaterEqual(int(c.yaml("stats")["current-jobs-urgent"]), 2)
        self.assertEqual(c.cmd("kick 1"), "KICKED 1")
        self.assertEqual(c.yaml("stats-tube " + c.tube)["current-jobs-urgent"], "3")

    def test_stats_job_fields(self):
        c = self.conn()
        jid = c.put(b"s", pri=9, delay=30, ttr=20)
        stats = c.yaml("stats-job %d" % jid)
        expected = {"id": str(jid), "tube": c.tube, "state": "delayed", "pri": "9",
                    "delay": "30", "ttr": "20", "file": "0", "reserves": "0",
                    "timeouts": "0", "releases": "0", "buries": "0", "kicks": "0"}
        for key, value in expected.items():
            self.assertEqual(stats[key], value, key)
        self.assertIn(stats["time-left"], ("29", "30"))
        self.assertIn(stats["age"], ("0", "1"))

    def test_stats_has_every_field_the_protocol_lists(self):
        c = self.conn()
        c.put()
        stats = c.yaml("stats")
        numeric = ["current-jobs-urgent", "current-jobs-ready", "current-jobs-reserved",
                   "current-jobs-delayed", "current-jobs-buried", "cmd-put", "cmd-peek",
                   "cmd-peek-ready", "cmd-peek-delayed", "cmd-peek-buried", "cmd-reserve",
                   "cmd-use", "cmd-watch", "cmd-ignore", "cmd-delete", "cmd-release", "cmd-bury",
                   "cmd-kick", "cmd-stats", "cmd-stats-job", "cmd-stats-tube", "cmd-list-tubes",
                   "cmd-list-tube-used", "cmd-list-tubes-watched", "cmd-pause-tube",
                   "job-timeouts", "total-jobs", "max-job-size", "current-tubes",
                   "current-connections", "current-producers", "current-workers",
                   "current-waiting", "total-connections", "pid", "uptime",
                   "binlog-oldest-index", "binlog-current-index", "binlog-max-size",
                   "binlog-records-written", "binlog-records-migrated"]
        for key in numeric:
            self.assertRegex(stats.get(key, ""), r"^\d+$", key)
        for key in ("version", "rusage-utime", "rusage-stime", "draining", "id", "hostname",
                    "os", "platform"):
            self.assertIn(key, stats)
        self.assertGreaterEqual(int(stats["cmd-put"]), 1)
        self.assertGreaterEqual(int(stats["current-connections"]), 1)
        self.assertGreaterEqual(int(stats["current-jobs-ready"]), 1)
        if ON_KVQ:
            self.assertEqual(stats["max-job-size"], "1000")
            self.assertTrue(stats["version"].startswith('"kvq '), stats["version"])

    # -- bad input -------------------------------------------------------------------------
    def test_bad_input_gets_the_protocols_errors_and_the_connection_goes_on(self):
        c = self.conn()
        self.assertEqual(c.cmd("frobnicate"), "UNKNOWN_COMMAND")
        self.assertEqual(c.cmd("put 1 0 1"), "BAD_FORMAT")
        self.assertEqual(c.cmd("put -1 0 1 1"), "BAD_FORMAT")
        self.assertEqual(c.cmd("put 4294967296 0 1 1"), "BAD_FORMAT")
        self.assertEqual(c.cmd("reserve extra"), "BAD_FORMAT")
        self.assertEqual(c.cmd("use -leading-hyphen"), "BAD_FORMAT")
        self.assertEqual(c.cmd("use " + "a" * 201), "BAD_FORMAT")
        self.assertEqual(c.cmd("use  double-space"), "BAD_FORMAT")
        self.assertEqual(c.cmd("x" * 300), "BAD_FORMAT")
        self.assertEqual(c.cmd("list-tube-used"), "USING " + c.tube)
        # The body must end with CRLF; its <bytes> + 2 bytes are taken either way.
        self.assertEqual(c.cmd("put 0 0 1 3", b"abcd"), "EXPECTED_CRLF")
        # The "\n" after "d\r" begins the next line.
        self.assertEqual(c.cmd("list-tube-used"), "UNKNOWN_COMMAND")
        self.assertEqual(c.cmd("list-tube-used"), "USING " + c.tube)

    def test_a_job_too_big_is_refused_and_its_body_drained(self):
        c = self.conn()
        size = 1001 if ON_KVQ else 65536
        self.assertEqual(c.cmd("put 0 0 1 %d" % size, b"z" * size), "JOB_TOO_BIG")
        self.assertEqual(c.cmd("list-tube-used"), "USING " + c.tube)
        ok = 1000 if ON_KVQ else 65535
        jid = c.put(b"y" * ok)
        self.assertEqual(c.job("reserve-with-timeout 5"), ("RESERVED", jid, b"y" * ok))

    def test_garbage_never_stops_the_server(self):
        junk = [bytes(range(256)) * 4, b"\r\n" * 50, b"put 0 0 1 5\r\nab", b"\x00" * 300,
                b"reserve-with-timeout 99999999999\r\n", b"put 0 0 1 4294967295\r\n" + b"q" * 10]
        for data in junk:
            c = Conn(self.address)
            c.send(data)
            c.close()
        c = self.conn()
        self.assertEqual(c.cmd("list-tube-used"), "USING " + c.tube)

    # -- kvq's deliberate differences --------------------------------------------------------
    @unittest.skipUnless(ON_KVQ, "durability: beanstalkd without -b keeps jobs in memory only")
    def test_jobs_survive_a_restart(self):
        data = tempfile.mkdtemp(prefix="kvq-e2e-beanstalk-")
        args = ["--beanstalk-listen", "127.0.0.1:0"]
        first = KvqServer(data_dir=data, extra_args=args, durability="sync").start()
        try:
            c = Conn(first.beanstalk_address)
            tube = uniq("tube")
            c.cmd("use " + tube)
            jid = c.put(b"durable", pri=4)
            c.close()
        finally:
            first.stop()
        second = KvqServer(data_dir=data, extra_args=args).start()
        try:
            c = Conn(second.beanstalk_address)
            c.cmd("watch " + tube)
            c.cmd("ignore default")
            self.assertEqual(c.job("reserve-with-timeout 5"), ("RESERVED", jid, b"durable"))
            # Ids go on from where they were: never reused.
            c.cmd("use " + tube)
            self.assertGreater(c.put(), jid)
            c.close()
        finally:
            second.cleanup()
            import shutil
            shutil.rmtree(data, ignore_errors=True)


@unittest.skipUnless(ON_KVQ, "the same tests again, on kvq's worker pool")
class BeanstalkProtocolDurableTest(BeanstalkProtocolTest):
    durability = "durable"


if __name__ == "__main__":
    unittest.main()
