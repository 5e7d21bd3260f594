# SPDX-License-Identifier: Apache-2.0
"""kvq.aio.AsyncClient against a real kvq serve: the client's calls as coroutines."""

import asyncio
import time
import unittest

from support import ServerTest, kvq, uniq
from kvq.aio import AsyncClient, AsyncWorker


class Async(ServerTest):

    def run_async(self, coro):
        return asyncio.run(asyncio.wait_for(coro, 20))

    def test_calls_are_coroutines_with_the_clients_answers_and_errors(self):
        async def main():
            client = AsyncClient(self.server.url, timeout=10)
            t = uniq("aio")
            await client.put_type(t, 30)
            self.assertTrue(await client.add(t, "a", {"n": 1}))
            self.assertEqual((await client.get(t, "a"))["data"], {"n": 1})
            self.assertEqual((await client.counts(t))["pending"], 1)
            with self.assertRaises(kvq.NotFound):
                await client.get(t, "missing")
        self.run_async(main())

    def test_a_long_poll_does_not_block_the_loop(self):
        async def main():
            client = AsyncClient(client=self.client)
            t = uniq("aio")
            await client.put_type(t, 30)
            started = time.monotonic()
            poll = asyncio.ensure_future(client.accept(t, timeout=2))
            await client.add(t, "quick")  # while the accept waits
            added_after = time.monotonic() - started
            jobs = await poll
            return added_after, [j["id"] for j in jobs]
        added_after, ids = self.run_async(main())
        self.assertLess(added_after, 1.5)
        self.assertEqual(ids, ["quick"])

    def test_events_are_an_async_iterator(self):
        async def main():
            client = AsyncClient(client=self.client)
            t = uniq("aio")
            await client.put_type(t, 30)
            await client.add(t, "e")
            seen = []
            async for event in client.events(t, "e", follow=True, timeout=10):
                seen.append(event["state"])
                if event["state"] == "pending":
                    [job] = await client.accept(t)
                    await client.finish(t, "e", job["lock"], "ok")
                if event["state"] == "finished":
                    break
            ids = [j["id"] async for j in client.iter_jobs(t)]
            return seen, ids
        seen, ids = self.run_async(main())
        self.assertEqual(seen[0], "pending")
        self.assertEqual(seen[-1], "finished")
        self.assertEqual(ids, ["e"])


if __name__ == "__main__":
    unittest.main()


class AsyncWorkers(ServerTest):

    def test_coroutine_handlers_run_on_the_loop_and_burst_returns(self):
        t = self.new_type()

        async def main():
            worker = AsyncWorker(AsyncClient(client=self.client), concurrency=4,
                                 poll_timeout=1, health_timeout=2, handle_signals=False)
            loop = asyncio.get_running_loop()
            loops = []

            @worker.handler(t)
            async def double(job):
                loops.append(asyncio.get_running_loop())
                await asyncio.sleep(0.05)
                return job.data["n"] * 2

            for n in range(6):
                self.client.add(t, "j%d" % n, {"n": n})
            started = time.monotonic()
            await worker.run(burst=True)
            return time.monotonic() - started, all(x is loop for x in loops), len(loops)

        took, same_loop, ran = asyncio.run(asyncio.wait_for(main(), 20))
        self.assertEqual(ran, 6)
        self.assertTrue(same_loop, "the handlers ran on run()'s loop")
        self.assertLess(took, 0.05 * 6)  # four at once, not one after another
        self.assertEqual([self.client.get(t, "j%d" % n)["result"] for n in range(6)],
                         [0, 2, 4, 6, 8, 10])

    def test_a_cancelled_job_cancels_its_task(self):
        t = self.new_type(timeout=1)  # heartbeats every third of a second

        async def main():
            worker = AsyncWorker(self.client, poll_timeout=1, health_timeout=2,
                                 handle_signals=False)
            started, cancelled = asyncio.Event(), asyncio.Event()

            @worker.handler(t)
            async def forever(job):
                started.set()
                try:
                    await asyncio.sleep(60)
                except asyncio.CancelledError:
                    cancelled.set()
                    raise

            self.client.add(t, "slow")
            running = asyncio.ensure_future(worker.run())
            try:
                await asyncio.wait_for(started.wait(), 10)
                self.client.cancel(t, "slow")
                await asyncio.wait_for(cancelled.wait(), 10)  # at the job's next heartbeat
            finally:
                worker.stop(grace=0)
                await running

        asyncio.run(asyncio.wait_for(main(), 30))
        self.assertEqual(self.client.get(t, "slow")["outcome"], "cancelled")
