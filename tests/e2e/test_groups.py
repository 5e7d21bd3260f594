"""Job groups across a cluster: three `kvq serve` processes on one store — one LMDB data
directory shared by the three, and (in its own class) one etcd — where a type's
max_running_per_group, set through one server, holds exactly for acceptors spread over all three;
a full group does not hold back the others; accepts take turns between groups, so a few small
groups added after a big one get their jobs out within the first rounds; GET
/v1/types/{type}/groups shows each group; and the fields are checked (`group` in an add and a
batch add, `max_running_per_group`, the route's `limit`). Also the metric and the CLI."""

import json
import shutil
import threading
import time
import unittest

import three_servers
from kvq_server import note, q, uniq
from test_cli import key_values, run_kvq, table


class GroupsOnThreeServers:
    """A mixin: self.servers (three KvqServer on one store) and self.clients, from
    self.start_servers(), which each class defines."""

    def start_servers(self):
        raise NotImplementedError

    def setUp(self):
        self.servers = self.start_servers()
        self.clients = [s.client() for s in self.servers]

    def new_type(self, prefix="grp", **settings):
        t = uniq(prefix)
        self.ok(self.clients[0].put("/v1/types/%s" % q(t), dict({"timeout": 30}, **settings)))
        return t

    def ok(self, r, status=200):
        self.assertEqual(r.status, status, r)
        return r.json if r.body else None

    def groups(self, t, client=None, query=""):
        body = self.ok((client or self.clients[0]).get("/v1/types/%s/groups%s" % (q(t), query)))
        return body

    def finish(self, client, t, job):
        self.ok(client.post("/v1/jobs/%s/%s/finish" % (q(t), q(job["id"])), {"lock": job["lock"]}))

    # -- max_running_per_group -------------------------------------------------------------
    def test_max_running_per_group_holds_across_servers_under_many_acceptors(self):
        limit, groups, per_group, acceptors = 2, 4, 9, 12
        t = self.new_type("pergroup")
        body = self.ok(self.clients[1].put("/v1/types/%s" % q(t), {"max_running_per_group": limit}))
        self.assertEqual(body["max_running_per_group"], limit)
        self.assertEqual(
            self.ok(self.clients[2].get("/v1/types/%s" % q(t)))["max_running_per_group"], limit)
        names = ["g%d" % g for g in range(groups)]
        for i in range(per_group):
            for g, name in enumerate(names):
                self.ok(self.clients[(i + g) % 3].add(t, "%s-%02d" % (name, i), group=name))
        jobs = groups * per_group

        lock = threading.Lock()
        state = {"held": {n: 0 for n in names}, "max_held": {n: 0 for n in names},
                 "max_listed": {n: 0 for n in names}, "max_total": 0}

        def hold(c, job):
            group = job["id"].split("-")[0]
            # Counted from the answer until just before the finish is sent: a job counted is
            # surely running, so the count never exceeds how many of its group really run.
            with lock:
                state["held"][group] += 1
                state["max_held"][group] = max(state["max_held"][group], state["held"][group])
                state["max_total"] = max(state["max_total"], sum(state["held"].values()))
            listing = c.get("/v1/jobs/%s?state=running&limit=1000" % q(t))
            listed = listing.json["jobs"] if listing.status == 200 else []
            time.sleep(0.05)  # hold the slot a moment, so that others contend for it
            with lock:
                for name in names:
                    running = sum(1 for j in listed if j["group"] == name)
                    state["max_listed"][name] = max(state["max_listed"][name], running)
                state["held"][group] -= 1
            return [] if listing.status == 200 else [listing]

        done, errors, running = three_servers.accept_hold_finish(
            self.servers, t, jobs, acceptors, hold, 150)
        state.update(done=done, errors=errors)
        self.assertEqual(running, [], "acceptors still running")
        note("max_running_per_group", limit, "held at most", state["max_held"], "listed at most",
             state["max_listed"], "running at once at most", state["max_total"])
        self.assertEqual(state["errors"], [])
        self.assertEqual(state["done"], jobs)
        for name in names:
            self.assertLessEqual(state["max_held"][name], limit, state)
            self.assertLessEqual(state["max_listed"][name], limit, state)
        # The limit was reached (the acceptors contended), and groups ran side by side: a group
        # at its limit held back only its own jobs.
        self.assertEqual(max(state["max_held"].values()), limit, state)
        self.assertGreater(state["max_total"], limit, state)
        body = self.ok(self.clients[0].get("/v1/jobs/%s?state=succeeded&limit=1000" % q(t)))
        self.assertEqual(len(body["jobs"]), jobs)

    def test_a_full_group_waits_while_the_other_groups_run(self):
        c1, c2, c3 = self.clients
        t = self.new_type("full", max_running_per_group=1)
        for i in range(3):
            self.ok(c1.add(t, "a%d" % i, group="a"))
        self.ok(c2.add(t, "b0", group="b"))
        # One accept asks for four: group a gives one (its limit), group b its one.
        r = c1.accept(t, count=4)
        taken = {j["id"]: j for j in self.ok(r)["jobs"]}
        self.assertEqual(sorted(i[0] for i in taken), ["a", "b"], taken)
        self.assertEqual(c2.accept(t, timeout=0).status, 204, "group a is full, b has no more")
        running_a = next(j for i, j in taken.items() if i.startswith("a"))
        body = self.groups(t, c3)
        self.assertEqual(body["next_after"], "")
        by_name = {g["group"]: g for g in body["groups"]}
        self.assertEqual(sorted(by_name), ["a", "b"])
        self.assertEqual((by_name["a"]["running"], by_name["a"]["pending"], by_name["a"]["full"],
                          by_name["a"]["in_turn_at"]), (1, 2, True, None), body)
        self.assertEqual((by_name["b"]["running"], by_name["b"]["pending"], by_name["b"]["full"]),
                         (1, 0, True), body)

        # A job of another group is taken while a is still full.
        self.ok(c3.add(t, "c0", group="c"))
        r = c2.accept(t, timeout=0)
        self.assertEqual([j["id"] for j in self.ok(r)["jobs"]], ["c0"])

        # A long-poll waiting on server 3 gets a's next job once a's run ends through server 2.
        out = {}
        waiter = threading.Thread(target=lambda: out.update(r=c3.accept(t, timeout=30)),
                                  daemon=True)
        waiter.start()
        waiter.join(1.0)  # a short look, not a synchronisation
        self.assertTrue(waiter.is_alive(), "a waiting accept got %r while a was full" % out.get("r"))
        self.finish(c2, t, running_a)
        waiter.join(25)
        self.assertFalse(waiter.is_alive(), "the waiting accept was not woken by the finish")
        got = self.ok(out["r"])["jobs"]
        self.assertEqual(len(got), 1)
        self.assertTrue(got[0]["id"].startswith("a"), got)

        # Cleared, group a runs its last job beside the one it has.
        self.assertIsNone(self.ok(c1.put("/v1/types/%s" % q(t), {"max_running_per_group": None}))
                          ["max_running_per_group"])
        r = c1.accept(t, timeout=0)
        self.assertTrue(self.ok(r)["jobs"][0]["id"].startswith("a"), r)

    # -- fairness ----------------------------------------------------------------------------
    def test_small_groups_added_after_a_big_one_come_out_within_the_first_rounds(self):
        t = self.new_type("fair")
        big, small = 30, {"s1": 2, "s2": 2, "s3": 2}
        for i in range(big):
            self.ok(self.clients[i % 3].add(t, "big-%02d" % i, group="big"))
        for name, n in small.items():
            for i in range(n):
                self.ok(self.clients[i % 3].add(t, "%s-%d" % (name, i), group=name))
        order = []
        for n in range(12):
            c = self.clients[n % 3]
            job = self.ok(c.accept(t, timeout=0))["jobs"][0]
            order.append(job["id"])
            self.finish(c, t, job)
        # Four groups with due jobs: two rounds of four accepts take every small group's two.
        rounds = len(small) + 1
        first_two_rounds = order[:2 * rounds]
        self.assertEqual(sorted(i for i in first_two_rounds if not i.startswith("big")),
                         sorted("%s-%d" % (name, i) for name, n in small.items() for i in range(n)),
                         order)
        # And the big group had its turn in each round, never more.
        self.assertEqual(sum(1 for i in first_two_rounds if i.startswith("big")), 2, order)
        self.assertTrue(all(i.startswith("big") for i in order[2 * rounds:]), order)

    # -- the groups route, and the job's group ----------------------------------------------
    def test_the_groups_route_lists_groups_by_name_a_page_at_a_time(self):
        c1, c2, _ = self.clients
        t = self.new_type("route")
        self.assertFalse(self.ok(c1.get("/v1/types/%s" % q(t)))["has_groups"])
        self.assertEqual(self.groups(t), {"groups": [], "next_after": ""})
        self.ok(c1.add(t, "none"))
        names = ["delta", "alpha", "charlie", "bravo", "echo"]
        for name in names:
            self.ok(c2.add(t, "j-" + name, group=name))
        self.assertTrue(self.ok(c1.get("/v1/types/%s" % q(t)))["has_groups"])
        job = self.ok(c1.job(t, "j-alpha"))
        self.assertEqual(job["group"], "alpha")
        self.assertIsNone(self.ok(c1.job(t, "none"))["group"])
        listed = self.ok(c1.get("/v1/jobs/%s?limit=10" % q(t)))["jobs"]
        self.assertEqual({j["id"]: j["group"] for j in listed},
                         dict({"none": None}, **{"j-" + n: n for n in names}))

        seen, after = [], ""
        for _ in range(4):
            body = self.groups(t, c2, "?limit=2" + ("&after=" + q(after) if after else ""))
            seen += [g["group"] for g in body["groups"]]
            for g in body["groups"]:
                self.assertEqual((g["running"], g["pending"], g["full"]), (0, 1, False), g)
                self.assertIsInstance(g["in_turn_at"], int, g)
            after = body["next_after"]
            if not after:
                break
        self.assertEqual(seen, sorted(names))
        self.assertEqual([g["group"] for g in self.groups(t, query="?after=charlie")["groups"]],
                         ["delta", "echo"])
        # A group whose jobs are all gone is not listed.
        self.ok(c1.delete("/v1/jobs/%s/%s" % (q(t), q("j-bravo"))))
        self.assertNotIn("bravo", [g["group"] for g in self.groups(t)["groups"]])

    def test_groups_fields_are_checked(self):
        c = self.clients[0]
        t = self.new_type("bad")
        for bad in ("", "x" * 129, "tab\there", "nl\n", "nul\u0000", "del\u007f", 5, ["a"]):
            r = c.add(t, "j", group=bad)
            self.assertEqual((r.status, r.json["error"]), (400, "invalid_argument"), (bad, r))
            self.assertIn("group", r.json["message"], bad)
        self.assertEqual(c.job(t, "j").status, 404, "nothing was added")
        self.ok(c.add(t, "longest", group="x" * 128))
        self.ok(c.add(t, "unicode", group="société-générale"))
        self.assertEqual(self.ok(c.job(t, "unicode"))["group"], "société-générale")
        self.ok(c.add(t, "null", group=None))
        self.assertIsNone(self.ok(c.job(t, "null"))["group"])

        # A batch: each job's group checked as in a single add; one bad one adds none.
        batch = "/v1/jobs/%s/batch" % q(t)
        r = c.post(batch, {"jobs": [{"id": "b1", "group": "g"}, {"id": "b2", "group": "x" * 129}]})
        self.assertEqual((r.status, r.json["error"]), (400, "invalid_argument"), r)
        self.assertIn("group", r.json["message"])
        self.assertEqual(c.job(t, "b1").status, 404)
        self.assertEqual(self.ok(c.post(batch, {"jobs": [{"id": "b1", "group": "g1"},
                                                         {"id": "b2", "group": "g2"},
                                                         {"id": "b3"}]}))["added"], 3)
        self.assertEqual([self.ok(c.job(t, i))["group"] for i in ("b1", "b2", "b3")],
                         ["g1", "g2", None])

        for bad in (0, 1000001, -1, "2", 1.5):
            r = c.put("/v1/types/%s" % q(t), {"max_running_per_group": bad})
            self.assertEqual((r.status, r.json["error"]), (400, "invalid_argument"), (bad, r))
            self.assertIn("max_running_per_group", r.json["message"], bad)
        self.assertIsNone(self.ok(c.get("/v1/types/%s" % q(t)))["max_running_per_group"])
        body = self.ok(c.put("/v1/types/%s" % q(t), {"max_running_per_group": 3, "max_running": 5}))
        self.assertEqual((body["max_running_per_group"], body["max_running"]), (3, 5))
        # Absent leaves it as it is; null clears it.
        body = self.ok(c.put("/v1/types/%s" % q(t), {"timeout": 20}))
        self.assertEqual(body["max_running_per_group"], 3)
        types = self.ok(c.get("/v1/types"))["types"]
        self.assertEqual(next(x for x in types if x["type"] == t)["max_running_per_group"], 3)
        body = self.ok(c.put("/v1/types/%s" % q(t), {"max_running_per_group": None}))
        self.assertEqual((body["max_running_per_group"], body["max_running"]), (None, 5))
        r = c.put("/v1/types/%s" % q(uniq("absent")), {"max_running_per_group": 2})
        self.assertEqual((r.status, r.json["error"]), (404, "not_found"), r)

        for query in ("?limit=0", "?limit=1001", "?limit=x", "?limit=-1"):
            r = c.get("/v1/types/%s/groups%s" % (q(t), query))
            self.assertEqual((r.status, r.json["error"]), (400, "invalid_argument"), (query, r))
            self.assertIn("limit", r.json["message"], query)
        self.ok(c.get("/v1/types/%s/groups?limit=1000" % q(t)))
        r = c.get("/v1/types/%s/groups" % q(uniq("absent")))
        self.assertEqual((r.status, r.json["error"]), (404, "not_found"), r)

    def test_metrics_show_max_running_per_group_from_any_server(self):
        t = self.new_type("metric")
        self.ok(self.clients[0].put("/v1/types/%s" % q(t), {"max_running_per_group": 4}))
        text = self.clients[2].get("/metrics").body.decode()
        self.assertIn("# TYPE kvq_type_max_running_per_group gauge\n", text)
        self.assertIn('kvq_type_max_running_per_group{type="%s"} 4\n' % t, text)
        self.ok(self.clients[1].put("/v1/types/%s" % q(t), {"max_running_per_group": None}))
        text = self.clients[2].get("/metrics").body.decode()
        self.assertNotIn('kvq_type_max_running_per_group{type="%s"}' % t, text)


class GroupsOnOneLmdbDirectory(GroupsOnThreeServers, unittest.TestCase):

    def test_the_cli_adds_to_groups_sets_the_limit_and_lists_groups(self):
        url = self.servers[1].url
        t = self.new_type("cli")
        r = run_kvq("types", "set", t, "--max-running-per-group", "1", url=url)
        self.assertEqual(r.returncode, 0, r)
        fields = key_values(r.stdout)
        self.assertEqual((fields["max_running_per_group"], fields["max_running"]), ("1", "none"),
                         r.stdout)
        self.assertEqual(
            self.ok(self.clients[2].get("/v1/types/%s" % q(t)))["max_running_per_group"], 1)
        r = run_kvq("types", url=url)
        header, rows = table(r.stdout)
        self.assertEqual(header[-1], "PER-GROUP", r.stdout)
        self.assertEqual(next(row for row in rows if row[0] == t)[-1], "1", r.stdout)
        self.assertEqual(key_values(run_kvq("types", "get", t, url=url).stdout)
                         ["max_running_per_group"], "1")

        for i, group in enumerate(["acme", "acme", "globex"]):
            r = run_kvq("add", t, "j%d" % i, '{"n": %d}' % i, "--group", group, url=url)
            self.assertEqual((r.returncode, r.stdout), (0, "added %s/j%d\n" % (t, i)), r)
        r = run_kvq("add", t, "plain", url=url)
        self.assertEqual(r.returncode, 0, r)
        r = run_kvq("get", t, "j0", url=url)
        self.assertEqual(key_values(r.stdout)["group"], "acme", r.stdout)
        self.assertEqual(key_values(run_kvq("get", t, "plain", url=url).stdout)["group"], "null")
        r = run_kvq("get", t, "j2", "--json", url=url)
        self.assertEqual(json.loads(r.stdout)["group"], "globex")

        # One of acme's (its limit), globex's one, and the job without a group, which no group
        # limit holds back.
        taken = sorted(j["id"] for j in self.ok(self.clients[0].accept(t, count=4))["jobs"])
        self.assertEqual(len(taken), 3, taken)
        self.assertIn(taken[0], ("j0", "j1"))
        self.assertEqual(taken[1:], ["j2", "plain"])
        r = run_kvq("groups", t, url=url)
        self.assertEqual(r.returncode, 0, r)
        header, rows = table(r.stdout)
        self.assertEqual(header, ["GROUP", "RUNNING", "PENDING", "FULL", "IN-TURN-AT"], r.stdout)
        self.assertEqual([row[:4] for row in rows], [["acme", "1", "1", "yes"],
                                                     ["globex", "1", "0", "yes"]], r.stdout)
        self.assertEqual([len(row) for row in rows], [4, 4], "a full group is never in turn")
        r = run_kvq("groups", t, "--limit", "1", url=url)
        self.assertEqual(r.stdout.splitlines()[-1], "more: --after acme", r.stdout)
        r = run_kvq("groups", t, "--after", "acme", "--json", url=url)
        self.assertEqual([g["group"] for g in json.loads(r.stdout)["groups"]], ["globex"])

        r = run_kvq("types", "set", t, "--max-running-per-group", "none", url=url)
        self.assertEqual((r.returncode, key_values(r.stdout)["max_running_per_group"]),
                         (0, "none"), r)
        for bad in (("types", "set", t, "--max-running-per-group", "0"),
                    ("add", t, "j9", "--group", "x" * 129),
                    ("groups", t, "--limit", "0"),
                    ("groups", t, "--limit", "many"),
                    ("groups",)):
            r = run_kvq(*bad, url=url)
            self.assertEqual(r.returncode, 2, (bad, r))
        r = run_kvq("groups", uniq("absent"), url=url)
        self.assertEqual(r.returncode, 5, r)

    def start_servers(self):
        return three_servers.on_one_directory(self)


@unittest.skipIf(shutil.which("etcd") is None,
                 "Debian's etcd-server is not installed (scripts/install-deps.sh)")
class GroupsOnOneEtcd(three_servers.OnOneEtcd, GroupsOnThreeServers, unittest.TestCase):
    pass


if __name__ == "__main__":
    unittest.main()
