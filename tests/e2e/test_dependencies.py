"""Job dependencies over HTTP and the CLI (issue 43): an add's `depends_on` and
`on_dependency_failure`, the waiting state in get, list, the type's counts and /metrics, the
release of a waiting job when its last dependency succeeds, the cancel cascade, GET
/v1/jobs/{type}/{id}/dependencies with the dependencies' results, each refusal (a missing
dependency, more than 100, a cycle in a batch, a bad policy) as a 4xx naming the problem, and
`kvq add --depends-on`, `kvq ls --state waiting`, `kvq deps`. Every answer is checked against
docs/openapi.yaml by the client."""

import unittest

from kvq_server import ServerTestCase, q, uniq
from test_cli import key_values, run_kvq, table


class DependenciesTest(ServerTestCase):
    def new_type(self):
        t = uniq("dep")
        self.c.set_timeout(t, 60)
        return t

    def take(self, t):
        """The next due job of t (accepted), or None when none is due."""
        r = self.c.accept(t)
        if r.status == 204:
            return None
        return self.assertStatus(r, 200)["jobs"][0]

    def finish(self, t, job, result=None):
        body = {"lock": job["lock"]}
        if result is not None:
            body["result"] = result
        self.assertStatus(self.c.post("/v1/jobs/%s/%s/finish" % (q(t), q(job["id"])), body), 200)

    def test_a_waiting_job_is_released_by_its_last_dependency_and_reads_their_results(self):
        t = self.new_type()
        self.assertStatus(self.c.add(t, "a"), 200)
        self.assertStatus(self.c.add(t, "b"), 200)
        self.assertStatus(self.c.add(t, "c", depends_on=[{"type": t, "id": "a"},
                                                       {"type": t, "id": "b"}]), 200)
        job = self.assertJobState(t, "c", "waiting")
        self.assertEqual(job["dependencies"], 2)
        self.assertEqual(job["waiting_on"], 2)
        self.assertEqual(job["on_dependency_failure"], "cancel")
        self.assertTrue(self.assertJobState(t, "a", "pending")["has_dependents"])
        listed = self.assertStatus(self.c.get("/v1/jobs/%s?state=waiting" % q(t)), 200)
        self.assertEqual([j["id"] for j in listed["jobs"]], ["c"])
        metrics = self.c.get("/metrics")
        self.assertEqual(metrics.status, 200)
        self.assertIn('kvq_jobs{type="%s",state="waiting"} 1' % t, metrics.body.decode())
        # A waiting job is never accepted: a and b are, then nothing is due.
        first, second = self.take(t), self.take(t)
        self.assertEqual({first["id"], second["id"]}, {"a", "b"})
        self.assertIsNone(self.take(t))
        jobs = {first["id"]: first, second["id"]: second}
        self.finish(t, jobs["a"], {"n": 1})
        self.assertEqual(self.assertJobState(t, "c", "waiting")["waiting_on"], 1)
        self.finish(t, jobs["b"], {"n": 2})
        self.assertJobState(t, "c", "pending")
        self.assertEqual(self.take(t)["id"], "c")
        deps = self.assertStatus(self.c.get("/v1/jobs/%s/c/dependencies" % q(t)), 200)
        self.assertEqual([(d["id"], d["resolved"]) for d in deps["dependencies"]],
                         [("a", "succeeded"), ("b", "succeeded")])
        self.assertEqual([d["job"]["result"] for d in deps["dependencies"]],
                         [{"n": 1}, {"n": 2}])
        none = self.assertStatus(self.c.get("/v1/jobs/%s/a/dependencies" % q(t)), 200)
        self.assertEqual(none["dependencies"], [])
        self.assertStatus(self.c.get("/v1/jobs/%s/nope/dependencies" % q(t)), 404, "not_found")

    def test_a_dead_dependency_cancels_its_dependents_transitively_naming_it(self):
        t = self.new_type()
        self.assertStatus(self.c.add(t, "a"), 200)
        self.assertStatus(self.c.add(t, "b", depends_on=[{"type": t, "id": "a"}]), 200)
        self.assertStatus(self.c.add(t, "c", depends_on=[{"type": t, "id": "b"}]), 200)
        self.assertStatus(self.c.add(t, "r", depends_on=[{"type": t, "id": "a"}],
                                     on_dependency_failure="run"), 200)
        job = self.take(t)
        self.assertEqual(job["id"], "a")
        self.assertStatus(self.c.post("/v1/jobs/%s/a/fail" % q(t),
                                      {"lock": job["lock"], "error": {"message": "no"}, "retry": False}), 200)
        for jid, named in (("b", "'a'"), ("c", "'b'")):
            job = self.assertJobState(t, jid, "finished")
            self.assertEqual(job["outcome"], "cancelled")
            self.assertEqual(job["errors"][-1]["kind"], "dependency_failed")
            self.assertIn(named, job["errors"][-1]["message"])
        self.assertJobState(t, "r", "pending")

    def test_refusals_name_the_problem(self):
        t = self.new_type()
        r = self.c.add(t, "x", depends_on=[{"type": t, "id": "missing"}])
        self.assertStatus(r, 404, "not_found")
        self.assertIn("'missing'", r.json["message"])
        self.assertStatus(self.c.job(t, "x"), 404)
        many = [{"type": t, "id": "d%d" % i} for i in range(101)]
        r = self.c.add(t, "x", depends_on=many)
        self.assertStatus(r, 400, "invalid_argument")
        self.assertIn("depends_on", r.json["message"])
        r = self.c.add(t, "x", depends_on=[{"type": t}])
        self.assertStatus(r, 400, "invalid_argument")
        r = self.c.add(t, "x", on_dependency_failure="ignore")
        self.assertStatus(r, 400, "invalid_argument")
        self.assertIn("on_dependency_failure", r.json["message"])
        r = self.c.post("/v1/jobs/%s/batch" % q(t), {"jobs": [
            {"id": "p", "depends_on": [{"type": t, "id": "q"}]},
            {"id": "q", "depends_on": [{"type": t, "id": "p"}]}]})
        self.assertStatus(r, 400, "invalid_argument")
        self.assertIn("cycle", r.json["message"])
        # In one batch a dependency may come after its dependent.
        r = self.c.post("/v1/jobs/%s/batch" % q(t), {"jobs": [
            {"id": "p", "depends_on": [{"type": t, "id": "q"}]}, {"id": "q"}]})
        self.assertEqual(self.assertStatus(r, 200)["added"], 2)
        self.assertJobState(t, "p", "waiting")
        # An unfinished job cannot take dependencies by a later add.
        r = self.c.add(t, "q", depends_on=[{"type": t, "id": "p"}])
        self.assertStatus(r, 409, "wrong_state")


class DependenciesCliTest(ServerTestCase):
    def kvq(self, *args):
        return run_kvq(*args, url=self.server.url)

    def test_add_depends_on_ls_waiting_and_deps(self):
        t = uniq("depcli")
        self.c.set_timeout(t, 60)
        for jid in ("a", "b"):
            self.assertEqual(self.kvq("add", t, jid).returncode, 0)
        added = self.kvq("add", t, "c", "--depends-on", "%s/a" % t, "--depends-on", "%s/b" % t,
                         "--on-dependency-failure", "run")
        self.assertEqual(added.returncode, 0, added.stderr)
        shown = key_values(self.kvq("get", t, "c").stdout)
        self.assertEqual(shown["state"], "waiting")
        self.assertEqual(shown["waiting_on"], "2")
        self.assertEqual(shown["on_dependency_failure"], "run")
        listed = self.kvq("ls", t, "--state", "waiting")
        self.assertEqual(listed.returncode, 0, listed.stderr)
        _, rows = table(listed.stdout)
        self.assertEqual([row[0] for row in rows], ["c"])
        deps = self.kvq("deps", t, "c")
        self.assertEqual(deps.returncode, 0, deps.stderr)
        header, rows = table(deps.stdout)
        self.assertEqual(header[:3], ["TYPE", "ID", "RESOLVED"])
        self.assertEqual([row[1] for row in rows], ["a", "b"])
        bad = self.kvq("add", t, "d", "--depends-on", "no-slash")
        self.assertNotEqual(bad.returncode, 0)
        self.assertIn("TYPE/ID", bad.stderr)
        missing = self.kvq("add", t, "d", "--depends-on", "%s/nope" % t)
        self.assertNotEqual(missing.returncode, 0)
        self.assertIn("nope", missing.stderr)


if __name__ == "__main__":
    unittest.main()
