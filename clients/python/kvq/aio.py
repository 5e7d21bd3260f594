# SPDX-License-Identifier: Apache-2.0
"""kvq for asyncio: :class:`AsyncClient`, every call of :class:`kvq.Client` as a coroutine.

Each call runs the blocking client's in a thread of the event loop's default executor
(``loop.run_in_executor``), so a long poll (``accept``, ``wait``, ``result``) never blocks
the loop; the answers, errors and arguments are the blocking client's. Event streams
(``events``, ``worker_events``) and the paging iterators (``iter_jobs``, ``iter_groups``) are
async iterators: ``async for event in client.events(type, id, follow=True)``.

Standard library only, Python 3.9 or later.
"""

from __future__ import annotations

import asyncio
import functools
from typing import Any, AsyncIterator, Callable, Iterator, Optional

from .client import Client

__all__ = ["AsyncClient"]

_STREAMS = ("events", "worker_events", "iter_jobs", "iter_groups")
_DONE = object()


class AsyncClient:
    """``await client.add(...)``: the calls of :class:`kvq.Client`, each awaitable.

    ``AsyncClient(url, token=None, timeout=30, ssl_context=None)`` takes what ``Client``
    takes, or ``AsyncClient(client=kvq.Client(...))`` wraps one (an ``InlineClient`` too).
    Safe to share between tasks.
    """

    def __init__(self, *args: Any, client: Optional[Any] = None, **kwargs: Any) -> None:
        self.client = client if client is not None else Client(*args, **kwargs)

    def __repr__(self) -> str:
        return "kvq.aio.AsyncClient(%r)" % (self.client,)

    def __getattr__(self, name: str) -> Callable[..., Any]:
        call = getattr(self.client, name)
        if name.startswith("_") or not callable(call):
            raise AttributeError(name)
        if name in _STREAMS:
            return functools.partial(_stream, call)

        async def run(*args: Any, **kwargs: Any) -> Any:
            loop = asyncio.get_running_loop()
            return await loop.run_in_executor(None, functools.partial(call, *args, **kwargs))
        run.__name__ = name
        run.__doc__ = call.__doc__
        return run


async def _stream(call: Callable[..., Iterator[Any]], *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
    """Each item of the blocking iterator ``call(...)``, read in the executor."""
    loop = asyncio.get_running_loop()
    it = await loop.run_in_executor(None, lambda: iter(call(*args, **kwargs)))
    try:
        while True:
            item = await loop.run_in_executor(None, next, it, _DONE)
            if item is _DONE:
                return
            yield item
    finally:
        close = getattr(it, "close", None)
        if close is not None:
            await loop.run_in_executor(None, close)
