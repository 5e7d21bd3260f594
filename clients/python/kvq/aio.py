# SPDX-License-Identifier: Apache-2.0
"""kvq for asyncio: :class:`AsyncClient`, every call of :class:`kvq.Client` as a coroutine,
and :class:`AsyncWorker`, a runner of coroutine handlers.

Each call runs the blocking client's in a thread of the event loop's default executor
(``loop.run_in_executor``), so a long poll (``accept``, ``wait``, ``result``) never blocks
the loop; the answers, errors and arguments are the blocking client's. Event streams
(``events``, ``worker_events``) and the paging iterators (``iter_jobs``, ``iter_groups``) are
async iterators: ``async for event in client.events(type, id, follow=True)``.

Standard library only, Python 3.9 or later.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import os
import signal
import threading
from typing import Any, AsyncIterator, Callable, Iterator, Optional

from .client import Client

__all__ = ["AsyncClient", "AsyncWorker"]

_STREAMS = ("events", "worker_events", "iter_jobs", "iter_groups")
_DONE = object()


class AsyncClient:
    """``await client.add(...)``: the calls of :class:`kvq.Client`, each awaitable.

    ``AsyncClient(url, token=None, timeout=30, ssl_context=None)`` takes what ``Client``
    takes, or ``AsyncClient(client=kvq.Client(...))`` wraps one (a :class:`kvq.testing.InlineClient` too).
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


class AsyncWorker:
    """A :class:`kvq.Worker` whose handlers are coroutines, run on the event loop that
    awaits :meth:`run` (arq's model): ``@worker.handler("email") async def send(job): ...``.

    The runner's machinery (long polls, heartbeats, registration, retries, the drain on
    shutdown) is the blocking :class:`kvq.Worker`'s, in threads; each job's coroutine runs
    as a task on the loop, up to ``concurrency`` at once. When the job is taken away
    (``job.cancelled``: fenced, worker lost, shutdown past the grace) its task is cancelled.
    ``job.progress(...)`` is one short blocking request; ``await
    asyncio.to_thread(job.progress, value)`` keeps the loop free during it.

    ``AsyncWorker(client, **options)`` takes a :class:`kvq.Client`, an
    :class:`AsyncClient` (of any client, an InlineClient too), and the options of :class:`kvq.Worker`.
    SIGTERM and SIGINT stop it (unless ``handle_signals=False``); a second one exits at once.
    """

    def __init__(self, client: Any, *, handle_signals: bool = True, **options: Any) -> None:
        from .worker import Worker
        if isinstance(client, AsyncClient):
            client = client.client
        self.worker = Worker(client, handle_signals=False, **options)
        self._handle_signals = handle_signals
        self._loop: Optional[asyncio.AbstractEventLoop] = None

    def register(self, type: str, fn: Callable[[Any], Any]) -> Callable[[Any], Any]:
        """Run the coroutine function ``fn(job)`` for jobs of ``type``; its result is the job's."""
        if not asyncio.iscoroutinefunction(fn):
            raise TypeError("an AsyncWorker's handler is an async def function")
        self.worker.register(type, functools.partial(self._run_on_loop, fn))
        return fn

    def handler(self, type: str) -> Callable[[Callable[[Any], Any]], Callable[[Any], Any]]:
        """A decorator: ``@worker.handler("email")`` registers the coroutine function."""
        return lambda fn: self.register(type, fn)

    def _run_on_loop(self, fn: Callable[[Any], Any], job: Any) -> Any:
        if self._loop is None:
            raise RuntimeError("AsyncWorker: a job ran outside run()")
        future = asyncio.run_coroutine_threadsafe(fn(job), self._loop)
        while True:
            try:
                return future.result(timeout=0.05)
            except concurrent.futures.TimeoutError:
                if job.cancelled.is_set():
                    future.cancel()  # the task gets CancelledError; its outcome is dropped
                    job.check()

    async def run(self, burst: bool = False) -> None:
        """Accept and run jobs until :meth:`stop` (or SIGTERM / SIGINT), then drain, as
        :meth:`kvq.Worker.run` does (``burst``: also stop once nothing is due)."""
        self._loop = asyncio.get_running_loop()
        signals = []
        if self._handle_signals and threading.current_thread() is threading.main_thread():
            seen = []

            def on_signal(signum: int) -> None:
                if seen:
                    os._exit(128 + signum)
                seen.append(signum)
                self.worker.stop()
            for signum in (signal.SIGTERM, signal.SIGINT):
                self._loop.add_signal_handler(signum, on_signal, signum)
                signals.append(signum)
        try:
            await self._loop.run_in_executor(None, self.worker.run, burst)
        finally:
            for signum in signals:
                self._loop.remove_signal_handler(signum)
            self._loop = None

    def stop(self, grace: Optional[float] = None) -> None:
        """As :meth:`kvq.Worker.stop`; safe from the loop and from any thread."""
        self.worker.stop(grace)
