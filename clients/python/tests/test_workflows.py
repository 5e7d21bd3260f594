# SPDX-License-Identifier: Apache-2.0
"""Workflows against a real kvq serve: depends_on, dependencies(), batches and fan_out."""

import asyncio
import unittest

from support import ServerTest, kvq, uniq
from kvq.aio import AsyncClient


class Workflows(ServerTest):

    def finish_one(self, type, result=None):
        [job] = self.client.accept(type)
        self.client.finish(type, job["id"], job["lock"], result)
        return job

    def test_a_job_waits_for_its_dependency_then_sees_its_result(self):
        fetch, report = self.new_type(), self.new_type()
        self.client.add(fetch, "eu", {"region": "eu"})
        self.assertTrue(self.client.add(report, "weekly", depends_on=[{"type": fetch, "id": "eu"}]))
        job = self.client.get(report, "weekly")
        self.assertEqual((job["state"], job["dependencies"], job["waiting_on"]), ("waiting", 1, 1))
        self.assertEqual(self.client.accept(report), [])
        [dep] = self.client.dependencies(report, "weekly")
        self.assertEqual((dep["type"], dep["id"], dep["resolved"]), (fetch, "eu", None))

        self.finish_one(fetch, {"rows": 120})
        self.assertEqual(self.client.get(report, "weekly")["state"], "pending")
        [dep] = self.client.dependencies(report, "weekly")
        self.assertEqual((dep["resolved"], dep["job"]["result"]), ("succeeded", {"rows": 120}))
        self.assertEqual(self.client.dependencies(fetch, "eu"), [])

    def test_on_dependency_failure_and_add_many_with_dependencies(self):
        t = self.new_type()
        self.client.add_many(t, [
            {"id": "a"},
            {"id": "b", "depends_on": [(t, "a")]},
            {"id": "c", "depends_on": [{"type": t, "id": "a"}], "on_dependency_failure": "run"},
        ])
        self.assertEqual(self.client.get(t, "b")["state"], "waiting")
        self.client.cancel(t, "a")
        b, c = self.client.get(t, "b"), self.client.get(t, "c")
        self.assertEqual((b["state"], b["outcome"], b["errors"][-1]["kind"]),
                         ("finished", "cancelled", "dependency_failed"))
        self.assertEqual((c["state"], c["on_dependency_failure"]), ("pending", "run"))
        with self.assertRaises(kvq.NotFound):
            self.client.add(t, "d", depends_on=[(t, "nope")])
        with self.assertRaises(kvq.InvalidArgument):
            self.client.add(t, "e", depends_on=[(t, "c")], on_dependency_failure="maybe")

    def test_fan_out_fires_the_callback_once(self):
        work, report = self.new_type(), self.new_type()
        b = uniq("batch")
        batch = self.client.fan_out(b, work, [{"id": "j%d" % i, "data": {"n": i}} for i in range(5)],
                                    callback={"type": report, "id": "done", "data": {"to": "ops"}})
        self.assertEqual((batch["id"], batch["state"], batch["sealed"], batch["counts"]["members"]),
                         (b, "sealed", True, 5))
        self.assertEqual(self.client.get(work, "j0")["batch"], b)
        for _ in range(5):
            self.assertEqual(self.client.counts(report)["pending"], 0)
            self.finish_one(work)
        got = self.client.get_batch(b)
        self.assertEqual((got["state"], got["fired"], got["counts"]["succeeded"],
                          got["counts"]["unfinished"]), ("fired", True, 5, 0))
        self.assertIsNotNone(got["settled_at"])
        jobs = list(self.client.iter_jobs(report))
        self.assertEqual([j["id"] for j in jobs], ["done"])
        data = jobs[0]["data"]
        self.assertEqual((data["to"], data["batch"]["members"], data["batch"]["succeeded"]),
                         ("ops", 5, 5))

    def test_batch_calls_and_their_errors(self):
        t, report = self.new_type(), self.new_type()
        b = uniq("batch")
        put = self.client.put_batch(b, {"type": report, "id": "r"}, on="success")
        self.assertEqual((put["state"], put["on"], put["sealed"], put["settled_at"]),
                         ("open", "success", False, None))
        self.assertTrue(self.client.add(t, "m", batch=b))
        self.assertEqual(self.client.get_batch(b)["counts"]["members"], 1)
        self.assertEqual(self.client.seal_batch(b)["state"], "sealed")
        with self.assertRaises(kvq.WrongState) as cm:
            self.client.add(t, "late", batch=b)
        self.assertEqual((cm.exception.status, cm.exception.code), (409, "wrong_state"))
        with self.assertRaises(kvq.WrongState):
            self.client.add_many(t, [{"id": "late2", "batch": b}])
        with self.assertRaises(kvq.NotFound):
            self.client.get_batch(uniq("missing"))
        with self.assertRaises(kvq.NotFound):
            self.client.add(t, "x", batch=uniq("missing"))
        with self.assertRaises(kvq.InvalidArgument):
            self.client.put_batch(uniq("batch"), {"type": report, "id": "r"}, on="sometimes")

    def test_the_async_client_has_the_workflow_calls(self):
        async def main():
            client = AsyncClient(client=self.client)
            t, report = self.new_type(), self.new_type()
            b = uniq("batch")
            batch = await client.fan_out(b, t, [("x", {})], callback={"type": report, "id": "r"})
            self.assertEqual(batch["counts"]["members"], 1)
            await client.add(t, "y", depends_on=[(t, "x")])
            self.assertEqual((await client.get_batch(b))["state"], "sealed")
            [dep] = await client.dependencies(t, "y")
            self.assertEqual(dep["id"], "x")
        asyncio.run(asyncio.wait_for(main(), 20))


if __name__ == "__main__":
    unittest.main()
