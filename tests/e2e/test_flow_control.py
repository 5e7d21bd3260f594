"""Flow control across a cluster: three `kvq serve` processes on one store — one LMDB data
directory shared by the three processes, and (in its own class) one etcd — where a pause, a
max_running and a rate set through one server hold exactly in the others: a pause through server
1 stops accepts through servers 2 and 3, and a long-poll waiting on server 3 gets its job once
server 2 resumes the type; acceptors spread over the three servers never hold more than
max_running jobs at once; and no window of the rate's period sees more than its limit of
accepts. Also the routes' validation, and the metrics that show the settings."""

import json
import shutil
import threading
import time
import unittest

import three_servers
from kvq_server import q, uniq, wait_until
from test_cli import run_kvq


class ThreeServers:
    """A mixin: self.servers (three KvqServer on one store) and self.clients, from
    self.start_servers(), which the class's setUp calls."""

    def start_servers(self):
        raise NotImplementedError

    def setUp(self):
        self.servers = self.start_servers()
        self.clients = [s.client() for s in self.servers]

    def new_type(self, prefix="fc"):
        t = uniq(prefix)
        self.assertEqual(self.clients[0].set_timeout(t, 30).status, 200)
        return t

    def ok(self, r, status=200):
        self.assertEqual(r.status, status, r)
        return r.json if r.body else None

    def running(self, t, client=None):
        """The type's running jobs now, read in one snapshot (GET's list)."""
        body = self.ok((client or self.clients[0]).get(
            "/v1/jobs/%s?state=running&limit=1000" % q(t)))
        return len(body["jobs"])

    # -- pause ---------------------------------------------------------------
    def test_a_pause_through_one_server_holds_in_the_others_until_resumed(self):
        c1, c2, c3 = self.clients
        t = self.new_type("pause")
        body = self.ok(c1.post("/v1/types/%s/pause" % q(t), {}))
        self.assertEqual((body["paused"], body["paused_until"]), (True, None))
        for c in (c2, c3):
            self.assertTrue(self.ok(c.get("/v1/types/%s" % q(t)))["paused"])
        self.ok(c2.add(t, "j1"))  # adds are still taken
        for c in (c1, c2, c3):
            self.assertEqual(c.accept(t, timeout=0).status, 204)

        out = {}
        waiter = threading.Thread(target=lambda: out.update(r=c3.accept(t, timeout=30)),
                                  daemon=True)
        waiter.start()
        # While paused the waiting accept gets nothing: a short look, not a synchronisation.
        waiter.join(1.0)
        self.assertTrue(waiter.is_alive(), "a waiting accept got %r while paused" % out.get("r"))
        self.assertEqual(self.ok(c1.job(t, "j1"))["state"], "pending")

        body = self.ok(c2.post("/v1/types/%s/resume" % q(t)))
        self.assertFalse(body["paused"])
        waiter.join(25)
        self.assertFalse(waiter.is_alive(), "the waiting accept was not woken by the resume")
        self.assertEqual(out["r"].status, 200, out["r"])
        self.assertEqual(out["r"].json["jobs"][0]["id"], "j1")

    def test_a_pause_for_a_while_ends_by_itself(self):
        c1, c2, _ = self.clients
        t = self.new_type("pausefor")
        before = int(time.time() * 1000)
        body = self.ok(c1.post("/v1/types/%s/pause" % q(t), {"for_ms": 1500}))
        self.assertTrue(body["paused"])
        self.assertGreaterEqual(body["paused_until"], before + 1500)
        self.ok(c2.add(t, "j1"))
        self.assertEqual(c2.accept(t, timeout=0).status, 204)
        # A waiting accept gets the job once the pause has run out, with no resume.
        r = c2.accept(t, timeout=20)
        self.assertEqual(r.status, 200, r)
        self.assertGreaterEqual(int(time.time() * 1000), body["paused_until"])

    def test_pause_and_resume_validate(self):
        c = self.clients[0]
        t = self.new_type("pausebad")
        for bad in ({"for_ms": 0}, {"for_ms": -5}, {"for_ms": 1.5}, {"for_ms": "1s"}):
            r = c.post("/v1/types/%s/pause" % q(t), bad)
            self.assertEqual((r.status, r.json["error"]), (400, "invalid_argument"), (bad, r))
            self.assertIn("for_ms", r.json["message"])
        r = c.post("/v1/types/%s/pause" % q(t), {"until": 1})
        self.assertEqual((r.status, r.json["error"]), (400, "unknown_field"), r)
        self.assertFalse(self.ok(c.get("/v1/types/%s" % q(t)))["paused"])
        for route in ("pause", "resume"):
            r = c.post("/v1/types/%s/%s" % (q(uniq("absent")), route), {})
            self.assertEqual((r.status, r.json["error"]), (404, "not_found"), r)

    # -- max_running ---------------------------------------------------------
    def test_max_running_holds_across_servers_under_many_acceptors(self):
        limit, jobs, acceptors = 3, 36, 12
        t = self.new_type("maxrun")
        body = self.ok(self.clients[1].put("/v1/types/%s" % q(t), {"max_running": limit}))
        self.assertEqual(body["max_running"], limit)
        self.assertEqual(self.ok(self.clients[2].get("/v1/types/%s" % q(t)))["max_running"], limit)
        for i in range(jobs):
            self.ok(self.clients[i % 3].add(t, "j%03d" % i))

        lock = threading.Lock()
        state = {"held": 0, "max_held": 0, "max_listed": 0}

        def hold(c, job):
            # Counted from the answer until just before the finish is sent: a job counted
            # is surely running, so the count never exceeds how many really run.
            with lock:
                state["held"] += 1
                state["max_held"] = max(state["max_held"], state["held"])
            listed = self.running(t, c)
            time.sleep(0.05)  # hold the slot a moment, so that others contend for it
            with lock:
                state["max_listed"] = max(state["max_listed"], listed)
                state["held"] -= 1
            return []

        done, errors, running = three_servers.accept_hold_finish(
            self.servers, t, jobs, acceptors, hold, 120)
        state.update(done=done, errors=errors)
        self.assertEqual(running, [], "acceptors still running")
        self.assertEqual(state["errors"], [])
        self.assertEqual(state["done"], jobs)
        self.assertLessEqual(state["max_held"], limit, state)
        self.assertLessEqual(state["max_listed"], limit, state)
        self.assertGreaterEqual(state["max_held"], 2, "the acceptors never overlapped: %r" % state)
        body = self.ok(self.clients[0].get("/v1/jobs/%s?state=succeeded&limit=1000" % q(t)))
        self.assertEqual(len(body["jobs"]), jobs)

        # Cleared, the type takes more than the old limit at once.
        self.assertIsNone(self.ok(self.clients[2].put("/v1/types/%s" % q(t),
                                                      {"max_running": None}))["max_running"])
        for i in range(limit + 2):
            self.ok(self.clients[0].add(t, "k%d" % i))
        r = self.clients[1].accept(t, count=limit + 2)
        self.assertEqual(len(r.json["jobs"]), limit + 2, r)

    # -- rate ------------------------------------------------------------------
    def test_rate_holds_across_servers(self):
        limit, period_ms, jobs = 4, 1000, 14
        t = self.new_type("rate")
        body = self.ok(self.clients[0].put("/v1/types/%s" % q(t),
                                           {"rate": {"limit": limit, "period_ms": period_ms}}))
        self.assertEqual(body["rate"], {"limit": limit, "period_ms": period_ms})
        for i in range(jobs):
            self.ok(self.clients[1].add(t, "j%03d" % i))
        lock = threading.Lock()
        taken, errors = [], []

        def acceptor(n):
            c = self.servers[n % 3].client()
            while True:
                with lock:
                    if len(taken) >= jobs or errors:
                        return
                r = c.accept(t, timeout=2, count=3)
                if r.status == 204:
                    continue
                if r.status != 200:
                    with lock:
                        errors.append(r)
                    return
                for job in r.json["jobs"]:
                    f = c.post("/v1/jobs/%s/%s/finish" % (q(t), q(job["id"])),
                               {"lock": job["lock"]})
                    with lock:
                        if f.status == 200:
                            taken.append(job["id"])
                        else:
                            errors.append(f)

        threads = [threading.Thread(target=acceptor, args=(n,), daemon=True) for n in range(6)]
        for th in threads:
            th.start()
        for th in threads:
            th.join(60)
        self.assertFalse(any(th.is_alive() for th in threads), "acceptors still running")
        self.assertEqual(errors, [])
        self.assertEqual(sorted(taken), ["j%03d" % i for i in range(jobs)])
        # Each job ran once; its started_at is the accepting server's clock, as the rate counts.
        starts = sorted(self.ok(self.clients[2].job(t, "j%03d" % i))["started_at"]
                        for i in range(jobs))
        for i, start in enumerate(starts):
            in_window = [s for s in starts[i:] if s - start < period_ms]
            self.assertLessEqual(len(in_window), limit,
                                 "%d accepts within %d ms from %d: %r"
                                 % (len(in_window), period_ms, start, starts))
        # Fourteen accepts at four a second: the first and the last are at least three periods
        # apart.
        self.assertGreaterEqual(starts[-1] - starts[0], (jobs - 1) // limit * period_ms - 5,
                                starts)

    def test_limits_validate_and_clear(self):
        c = self.clients[0]
        t = self.new_type("limbad")
        for bad, field in (({"max_running": 0}, "max_running"),
                           ({"max_running": 1000001}, "max_running"),
                           ({"max_running": "3"}, "max_running"),
                           ({"rate": {"limit": 0, "period_ms": 1000}}, "rate.limit"),
                           ({"rate": {"limit": 1001, "period_ms": 1000}}, "rate.limit"),
                           ({"rate": {"limit": 5, "period_ms": 0}}, "rate.period_ms"),
                           ({"rate": {"limit": 5, "period_ms": 86400001}}, "rate.period_ms"),
                           ({"rate": {"limit": 5}}, "rate"),
                           ({"rate": 5}, "rate")):
            r = c.put("/v1/types/%s" % q(t), bad)
            self.assertEqual((r.status, r.json["error"]), (400, "invalid_argument"), (bad, r))
            self.assertIn(field, r.json["message"], bad)
        # A value of the wrong type is told the field's own range, not JSON's ±(2^53 - 1).
        for field in ("max_running", "max_running_per_group", "max_lost_runs"):
            for bad in ("2", 1.5, True, {"n": 2}, [2], 1e300, -1):
                r = c.put("/v1/types/%s" % q(t), {field: bad})
                self.assertEqual((r.status, r.json["error"]), (400, "invalid_argument"), (bad, r))
                self.assertIn("'%s' must be an integer from 1 to 1000000, or null" % field,
                              r.json["message"], (field, bad))
                self.assertNotIn("9007199254740991", r.json["message"])
        r = c.put("/v1/types/%s" % q(t), {"rate": {"limit": 5, "period_ms": 10, "burst": 2}})
        self.assertEqual((r.status, r.json["error"]), (400, "unknown_field"), r)
        body = self.ok(c.get("/v1/types/%s" % q(t)))
        self.assertEqual((body["max_running"], body["rate"]), (None, None))

        body = self.ok(c.put("/v1/types/%s" % q(t), {"max_running": 2,
                                                     "rate": {"limit": 10, "period_ms": 60000}}))
        self.assertEqual((body["max_running"], body["rate"]), (2, {"limit": 10, "period_ms": 60000}))
        # Absent leaves a limit as it is; null clears it.
        body = self.ok(c.put("/v1/types/%s" % q(t), {"timeout": 20}))
        self.assertEqual((body["max_running"], body["rate"]), (2, {"limit": 10, "period_ms": 60000}))
        body = self.ok(c.put("/v1/types/%s" % q(t), {"rate": None}))
        self.assertEqual((body["max_running"], body["rate"]), (2, None))
        body = self.ok(c.put("/v1/types/%s" % q(t), {"max_running": None}))
        self.assertEqual((body["max_running"], body["rate"]), (None, None))
        r = c.put("/v1/types/%s" % q(uniq("absent")), {"max_running": 2})
        self.assertEqual((r.status, r.json["error"]), (404, "not_found"), r)

    def test_metrics_show_pause_and_max_running_from_any_server(self):
        t = self.new_type("metric")
        self.ok(self.clients[0].put("/v1/types/%s" % q(t), {"max_running": 7}))
        self.ok(self.clients[0].post("/v1/types/%s/pause" % q(t)))
        text = self.clients[2].get("/metrics").body.decode()
        self.assertIn('kvq_type_paused{type="%s"} 1\n' % t, text)
        self.assertIn('kvq_type_max_running{type="%s"} 7\n' % t, text)
        self.ok(self.clients[1].post("/v1/types/%s/resume" % q(t)))
        text = self.clients[2].get("/metrics").body.decode()
        self.assertIn('kvq_type_paused{type="%s"} 0\n' % t, text)


class ThreeServersOnOneLmdbDirectory(ThreeServers, unittest.TestCase):

    def test_the_cli_pauses_resumes_and_sets_limits(self):
        url = self.servers[1].url
        t = self.new_type("cli")
        r = run_kvq("types", "set", t, "--max-running", "2", "--rate", "30/1m", url=url)
        self.assertEqual(r.returncode, 0, r)
        fields = dict(line.split(":", 1) for line in r.stdout.splitlines())
        self.assertEqual((fields["max_running"].strip(), fields["rate"].strip(),
                          fields["paused"].strip()), ("2", "30/60s", "no"), r.stdout)
        body = self.ok(self.clients[2].get("/v1/types/%s" % q(t)))
        self.assertEqual((body["max_running"], body["rate"]), (2, {"limit": 30, "period_ms": 60000}))

        r = run_kvq("pause", t, url=url)
        self.assertEqual((r.returncode, r.stdout), (0, "paused %s\n" % t), r)
        self.assertTrue(self.ok(self.clients[0].get("/v1/types/%s" % q(t)))["paused"])
        r = run_kvq("types", url=url)
        row = next(line.split() for line in r.stdout.splitlines() if line.startswith(t + " "))
        self.assertEqual(row[-4:], ["yes", "2", "30/60s", "none"], r.stdout)
        r = run_kvq("resume", t, url=url)
        self.assertEqual((r.returncode, r.stdout), (0, "resumed %s\n" % t), r)
        self.assertFalse(self.ok(self.clients[0].get("/v1/types/%s" % q(t)))["paused"])
        r = run_kvq("pause", t, "--for", "10m", "--json", url=url)
        self.assertEqual(r.returncode, 0, r)
        self.assertTrue(json.loads(r.stdout)["paused_until"] > time.time() * 1000 + 590000)

        r = run_kvq("types", "set", t, "--max-running", "none", "--rate", "none", url=url)
        self.assertEqual(r.returncode, 0, r)
        body = self.ok(self.clients[2].get("/v1/types/%s" % q(t)))
        self.assertEqual((body["max_running"], body["rate"]), (None, None))
        for bad in (("pause", t, "--for", "soon"), ("types", "set", t, "--rate", "5"),
                    ("types", "set", t, "--max-running", "0")):
            r = run_kvq(*bad, url=url)
            self.assertEqual(r.returncode, 2, r)
        r = run_kvq("pause", uniq("absent"), url=url)
        self.assertEqual(r.returncode, 5, r)

    def start_servers(self):
        return three_servers.on_one_directory(self)


@unittest.skipIf(shutil.which("etcd") is None,
                 "Debian's etcd-server is not installed (scripts/install-deps.sh)")
class ThreeServersOnOneEtcd(three_servers.OnOneEtcd, ThreeServers, unittest.TestCase):
    pass


if __name__ == "__main__":
    unittest.main()
