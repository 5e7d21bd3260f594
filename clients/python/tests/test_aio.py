# SPDX-License-Identifier: Apache-2.0
"""kvq.aio.AsyncClient against a real kvq serve: the client's calls as coroutines."""

import asyncio
import time
import unittest

from support import ServerTest, kvq, uniq
from kvq.aio import AsyncClient


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
