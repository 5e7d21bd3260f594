# SPDX-License-Identifier: Apache-2.0
"""The kvq worker runner: :class:`Worker` runs handlers on accepted jobs, and :class:`Job`
is what a handler receives."""

from __future__ import annotations

import itertools
import logging
import os
import signal
import socket
import threading
import time
import traceback
from typing import Any, Callable, Optional

from . import _otel, errors
from ._backoff import Backoff
from .client import Client, job_body

__all__ = ["Worker", "Job", "JobError", "NoRetry", "RetryIn", "Snooze"]

log = logging.getLogger("kvq.worker")

#: A handler: called with the running :class:`Job`; its return value (JSON) is the result.
Handler = Callable[["Job"], Any]

# A Job's life in the runner: RUNNING (the handler runs) -> ENDING (its finish or fail is
# being sent) -> DONE; or RUNNING -> HANDED_BACK (snoozed at shutdown) or FENCED (the
# server took it away). Whoever moves it out of RUNNING owns its ending.
_RUNNING, _ENDING, _DONE, _HANDED_BACK, _FENCED = range(5)


class Job:
    """A running job, as its handler sees it.

    Attributes:
        type, id: the job's type and id.
        data: its input (what the producer added); None for a job of bytes.
        body: the bytes of a job whose ``data_format`` is ``"bytes"`` (added with ``body``),
            else None.
        lock: the lock of this run (secret: whoever holds it can change the job).
        cancelled: a :class:`threading.Event`, set when the handler should stop: the job was
            taken away (removed, cancelled, its run lost: ``cancel_reason`` ``"halted"``),
            the worker was declared dead (``"worker_lost"``), or the worker shut down and
            handed the job back (``"shutdown"``). What a cancelled handler returns or raises
            is ignored.
        cancel_reason: why ``cancelled`` is set, or ``None``.
        traceparent: the W3C trace context its producer added it with, or ``None``. With
            OpenTelemetry's API importable, the handler runs in a consumer span that is its
            child (and current, so the handler's own spans join the trace).
    """

    def __init__(self, worker, job, beat_every):
        self.type = job["type"]
        self.id = job["id"]
        self.data = job.get("data")
        self.body = job_body(job)
        self.lock = job["lock"]
        self.traceparent: Optional[str] = job.get("traceparent")
        self._attempt: Optional[int] = job.get("attempt")
        self.cancelled = threading.Event()
        self.cancel_reason = None
        self._worker = worker
        self._mu = threading.Lock()
        self._state = _RUNNING
        self._beat_every = beat_every
        self._next_beat = time.monotonic() + beat_every
        self._ended = threading.Event()

    def __repr__(self):
        return "<kvq.Job %s/%s>" % (self.type, self.id)

    def progress(self, value: Any) -> None:
        """Report progress (any JSON value; the job's ``progress``). Each call is one
        ``update``, which is also a heartbeat. Raises :class:`kvq.Halted` (and sets
        ``cancelled``) if the job is no longer this worker's; a network error or 503 is
        logged and left to the next heartbeat."""
        self.check()
        try:
            self._worker.client.update(self.type, self.id, self.lock, progress=value)
        except errors.Halted:
            self._fence("halted")
            raise
        except errors.KvqError as err:
            if not err.retryable:
                raise
            log.warning("progress of %s/%s not sent: %s", self.type, self.id, err)
            return
        self._next_beat = time.monotonic() + self._beat_every

    def attempt(self) -> int:
        """Which attempt this run is: 1 for the first, counting every accept since the job was
        last added anew or rerun, less the runs handed back with snooze (Celery's
        ``request.retries`` + 1, arq's ``job_try``). The accept's answer carries it; from a
        server before 0.2.0, whose answer does not, it costs one request (a ``get`` of the job)."""
        if self._attempt is not None:
            return self._attempt
        return self._worker.client.get(self.type, self.id)["attempts"]

    def check(self) -> None:
        """Raise :class:`kvq.Halted` if ``cancelled`` is set: call it between steps of a
        long handler to stop as soon as the job is no longer this worker's."""
        if self.cancelled.is_set():
            raise errors.Halted("job %s/%s was cancelled in this worker (%s)"
                                % (self.type, self.id, self.cancel_reason), status=409,
                                code="halted")

    def _fence(self, reason):
        with self._mu:
            if self._state == _RUNNING:
                self._state = _FENCED
            if self.cancel_reason is None:
                self.cancel_reason = reason
        self.cancelled.set()

    def _claim(self, new_state):
        """Move RUNNING -> new_state; False if someone else already moved it."""
        with self._mu:
            if self._state != _RUNNING:
                return False
            self._state = new_state
            return True


class JobError(Exception):
    """Raised by a handler to fail the attempt with more than an exception says: ``kind``
    and ``details`` (any JSON value, kept beside the stack) recorded with the message;
    ``retry=False`` ends the job dead now; ``retry_in`` (seconds) retries after that long
    instead of the type's backoff (the attempt still counts). Any other exception fails the
    attempt with the type's policy."""

    def __init__(self, message, *, kind=None, details=None, retry=True, retry_in=None):
        super().__init__(message)
        self.kind = kind
        self.details = details
        self.retry = retry
        self.retry_in = retry_in


class NoRetry(JobError):
    """``raise kvq.NoRetry("bad input") from err``: the job ends dead at once (retrying will
    not help)."""

    def __init__(self, message, *, kind=None, details=None):
        super().__init__(message, kind=kind, details=details, retry=False)


class RetryIn(JobError):
    """``raise kvq.RetryIn(60, "rate limited")``: the job is retried after ``seconds``
    instead of its type's backoff; the attempt counts."""

    def __init__(self, seconds, message, *, kind=None, details=None):
        super().__init__(message, kind=kind, details=details, retry_in=seconds)


class Snooze(Exception):
    """``raise kvq.Snooze(30)``: hand the job back to run again after ``delay`` seconds,
    neither counting this run as an attempt nor recording an error ("not now")."""

    def __init__(self, delay=0.0):
        super().__init__("snoozed for %s s" % delay)
        self.delay = delay


class _Stopped(Exception):
    """stop() was called while run() was still starting."""


def _error_of(exc):
    kind = type(exc).__name__[:64] or "error"
    stack = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    error = {"message": str(exc) or kind, "kind": kind, "details": {"stack": stack},
             "retry": None, "retry_in": None}
    if isinstance(exc, JobError):
        if exc.kind:
            error["kind"] = exc.kind[:64]
        if exc.details is not None:
            error["details"] = {"stack": stack, "details": exc.details}
        error["retry"] = None if exc.retry else False
        error["retry_in"] = exc.retry_in
    return error


class Worker:
    """Runs handlers on the jobs of their types, as many at once as ``concurrency``.

    What it does (docs: clients/python/README.md):

    - one handler per job type (:meth:`handler` or :meth:`register`), called as
      ``handler(job)`` with a :class:`Job`; its return value (JSON) becomes the job's
      result (``finish``); an exception fails the job (``fail``) with the exception's
      message, its class as ``kind`` and the traceback in ``details.stack``, and the
      type's retry policy decides when it runs again or ends dead;
    - long-polls ``accept`` for up to as many jobs as it has free slots, and finishes each
      job with ``next``, taking the next due job of its types in the same request: a busy
      worker spends one request per job;
    - heartbeats every running job (``update``) at ``heartbeat_fraction`` of its type's
      timeout (read from the type), so a handler may run longer than the timeout;
    - registers with the workers layer (``worker_type``, ``worker_id``) and heartbeats that
      at a third of ``health_timeout``: if this process dies, its jobs go back to pending
      once the server declares it dead, without waiting for the jobs' timeouts;
    - sets ``job.cancelled`` when the server fences the job (409 ``halted``), or when this
      worker was declared dead (then it registers again);
    - retries 503s and network errors with jittered exponential backoff;
    - on :meth:`stop`, SIGTERM or SIGINT: stops accepting, lets running handlers finish for
      up to ``grace`` seconds, hands the rest back (``snooze``: pending at once, neither an
      attempt nor a lost run counted), unregisters and returns from :meth:`run`. A second
      signal exits at once.

    Args:
        client: a :class:`kvq.Client` (a :class:`kvq.testing.InlineClient` in tests).
        concurrency: handlers run at once, each in its own thread.
        worker_id: this worker's id (default ``HOST-PID``).
        worker_type: the worker type it registers as (default ``"python"``).
        health_timeout: seconds without a worker heartbeat before the server declares it
            dead.
        grace: seconds running handlers get to finish on shutdown.
        poll_timeout: seconds one accept long-polls (with several types: at most 1 s each,
            in turn). A shutdown cuts the accept under way short, so an idle worker stops at once.
        heartbeat_fraction: how often running jobs are heartbeated, as a fraction of their
            type's timeout.
        register: whether to register with the workers layer (default True).
        handle_signals: whether :meth:`run`, called in the main thread, handles SIGTERM and
            SIGINT (default True).
        info: a JSON object shown in the worker's registration (default ``{"pid": PID}``).
    """

    def __init__(self, client: Any, *, concurrency: int = 1, worker_id: Optional[str] = None,
                 worker_type: str = "python", health_timeout: float = 10.0, grace: float = 10.0,
                 poll_timeout: float = 10.0, heartbeat_fraction: float = 1 / 3,
                 register: bool = True, handle_signals: bool = True,
                 info: Optional[dict] = None) -> None:
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1, not %r" % (concurrency,))
        if not 0 < heartbeat_fraction < 1:
            raise ValueError("heartbeat_fraction must be in (0, 1), not %r"
                             % (heartbeat_fraction,))
        self.client = client
        self.concurrency = concurrency
        self.worker_id = worker_id or "%s-%d" % (socket.gethostname(), os.getpid())
        self.worker_type = worker_type
        self.health_timeout = health_timeout
        self.grace = grace
        self.poll_timeout = poll_timeout
        self.heartbeat_fraction = heartbeat_fraction
        self.info = {"pid": os.getpid()} if info is None else info
        self._register = register
        self._handle_signals = handle_signals
        self._handlers = {}
        self._type_info = {}      # type -> (timeout seconds, when read)
        self._cond = threading.Condition(threading.RLock())
        self._inflight = set()    # Jobs whose handler or ending is under way
        self._stopping = threading.Event()
        self._hard_exit = threading.Event()
        self._poll_mu = threading.RLock()  # stop() may run in a signal handler
        self._poll_conn = None  # the connection of the accept under way, cut short by stop()
        self._threads_stop = threading.Event()
        self._beat_kick = threading.Event()  # wakes the heartbeat thread: a new job, or stop
        self._token = None
        self._running = False
        self._next_supported = True  # whether the server's finish takes "next"

    # -- configuration -----------------------------------------------------------------
    def register(self, type: str, fn: Handler) -> Handler:
        """Run ``fn(job)`` for jobs of ``type`` (one handler per type)."""
        if type in self._handlers:
            raise ValueError("type %r already has a handler" % type)
        if not callable(fn):
            raise TypeError("a handler must be callable, not %r" % (fn,))
        self._handlers[type] = fn
        return fn

    def handler(self, type: str) -> Callable[[Handler], Handler]:
        """A decorator: ``@worker.handler("email")`` registers the function for ``type``."""
        return lambda fn: self.register(type, fn)

    # -- running -----------------------------------------------------------------------
    def run(self, burst: bool = False) -> None:
        """Register, then accept and run jobs until :meth:`stop` (or SIGTERM / SIGINT);
        then drain as the class describes and return. With ``burst``, it also stops once
        no job of its types is due and none is running (RQ's ``--burst``): for scripts and
        tests; jobs scheduled later (a retry's backoff) are left for another run. Raises :class:`kvq.NotFound` at once
        if a handler's type does not exist, and any error that retrying cannot cure
        (:class:`kvq.Unauthorized`, ...)."""
        if not self._handlers:
            raise RuntimeError("no handlers: register one with @worker.handler(type)")
        if self._running:
            raise RuntimeError("this worker is already running")
        self._running = True
        self._hard_exit.clear()
        self._threads_stop.clear()
        restore = self._install_signals()
        threads = []
        try:
            for t in self._handlers:
                self._beat_every(t, refresh=True, until_stopped=True)
            if self._register:
                self._token = self._retrying("register", lambda: self.client.register_worker(
                    self.worker_type, self.worker_id, info=self.info,
                    health_timeout=self.health_timeout), until_stopped=True)
                log.info("worker %s registered (worker type %r) at %s", self.worker_id,
                         self.worker_type, self.client.url)
                threads.append(self._start_thread(self._membership_loop, "membership"))
            threads.append(self._start_thread(self._heartbeat_loop, "heartbeat"))
            self._accept_loop(burst)
            self._drain_on_stop()
        except _Stopped:  # stopped before it could start
            pass
        finally:
            self._threads_stop.set()
            self._beat_kick.set()
            if not self._hard_exit.is_set():
                for th in threads:
                    th.join(5)
            if self._token is not None:
                self._unregister()
            self._running = False
            self._stopping.clear()  # so that it can run again
            for signum, previous in restore:
                signal.signal(signum, previous)

    def stop(self, grace: Optional[float] = None) -> None:
        """Ask :meth:`run` to stop: no more accepts, running handlers get ``grace`` seconds
        (default the worker's) to finish, the rest are handed back. Returns at once; safe
        from any thread and from a signal handler. Called before :meth:`run`, that run
        returns at once."""
        if grace is not None:
            self.grace = grace
        self._stopping.set()
        with self._cond:
            self._cond.notify_all()
        self._cut_poll()

    def _cut_poll(self):
        # An idle worker's accept long-polls for up to poll_timeout: shutting its socket
        # down ends it now. The server then takes no job for it (a job it handed out in that
        # instant comes back when the worker unregisters).
        with self._poll_mu:
            conn = self._poll_conn
            sock = conn.sock if conn is not None else None
            if sock is not None:
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def _set_poll_conn(self, conn):
        with self._poll_mu:
            self._poll_conn = conn
        if conn is not None and self._stopping.is_set():
            self._cut_poll()

    def drain(self, max_jobs: Optional[int] = None, run_scheduled: bool = False,
              timeout: Optional[float] = None) -> int:
        """Run due jobs one at a time in this thread, until none is due (or ``max_jobs``
        ran); returns how many ran. Meant for tests, with a
        :class:`kvq.testing.InlineClient` (it works on any server, without registering).
        With ``run_scheduled``, it goes on until the handlers' types have no pending job
        left, waiting in real time for those scheduled later (a failed job's retry after its
        backoff): ``timeout`` seconds at most, then :class:`TimeoutError`."""
        if not self._handlers:
            raise RuntimeError("no handlers: register one with @worker.handler(type)")
        deadline = None if timeout is None else time.monotonic() + timeout
        ran = 0
        self._threads_stop.clear()
        beat = self._start_thread(self._heartbeat_loop, "heartbeat")
        try:
            while max_jobs is None or ran < max_jobs:
                got = False
                for t in self._handlers:
                    jobs = self.client.accept(t, count=1, timeout=0, worker=self.worker_id)
                    for raw in jobs:
                        job = Job(self, raw, self._beat_every(t))
                        with self._cond:
                            self._inflight.add(job)
                        self._beat_kick.set()
                        self._run_job(job, chain=False)
                        ran += 1
                        got = True
                    if max_jobs is not None and ran >= max_jobs:
                        break
                if got:
                    continue
                if not run_scheduled:
                    break
                pending = {t: self.client.counts(t)["pending"] for t in self._handlers}
                if not any(pending.values()):
                    break
                if deadline is not None and time.monotonic() >= deadline:
                    raise TimeoutError("drain: jobs still pending after %g s: %r"
                                       % (timeout, pending))
                time.sleep(0.02)
        finally:
            self._threads_stop.set()
            self._beat_kick.set()
            beat.join(5)
        return ran

    # -- internals ---------------------------------------------------------------------
    def _install_signals(self):
        if not self._handle_signals or threading.current_thread() is not threading.main_thread():
            return []
        restore = []
        # A signal can interrupt this handler itself (CPython runs handlers between any two
        # bytecodes of the main thread), so which signal is the first is decided by one call
        # that no handler can split, and the stop is under way before anything is logged.
        taken = itertools.count()

        def on_signal(signum, frame):
            if next(taken) > 0 or self._stopping.is_set():
                log.warning("second signal (%d): exiting now", signum)
                self._hard_exit.set()
                raise SystemExit(128 + signum)
            self.stop()
            log.info("signal %d: stopping (a second one exits at once)", signum)

        for signum in (signal.SIGTERM, signal.SIGINT):
            restore.append((signum, signal.signal(signum, on_signal)))
        return restore

    def _start_thread(self, target, name, *args):
        th = threading.Thread(target=target, args=args, daemon=True,
                              name="kvq-%s-%s" % (name, self.worker_id))
        th.start()
        return th

    def _retrying(self, what, fn, give_up_after=None, until_stopped=False):
        """fn(), retrying 503s and network errors with jittered backoff (until the worker
        exits, or give_up_after seconds, or with until_stopped until stop() is called: then
        _Stopped); other errors raise."""
        backoff = Backoff()
        deadline = None if give_up_after is None else time.monotonic() + give_up_after
        while True:
            try:
                return fn()
            except errors.KvqError as err:
                if not err.retryable or self._hard_exit.is_set():
                    raise
                delay = backoff.next()
                if deadline is not None and time.monotonic() + delay > deadline:
                    raise
                log.warning("%s: %s (retrying in %.1f s)", what, err, delay)
                if until_stopped and self._stopping.wait(delay):
                    raise _Stopped() from None
                if self._hard_exit.wait(0 if until_stopped else delay):
                    raise

    def _beat_every(self, type, refresh=False, until_stopped=False):
        timeout, read_at = self._type_info.get(type, (None, 0.0))
        if refresh or timeout is None or time.monotonic() - read_at > 60:
            try:
                info = self._retrying("reading type %s" % type, lambda: self.client.get_type(type),
                                      give_up_after=None if timeout is None else 5,
                                      until_stopped=until_stopped)
                timeout = float(info["timeout"])
                self._type_info[type] = (timeout, time.monotonic())
            except errors.NotFound:
                if timeout is None:
                    raise errors.NotFound("type %r does not exist: create it (put_type) "
                                          "before running its worker" % type,
                                          status=404, code="not_found") from None
            except errors.KvqError as err:
                if timeout is None:
                    raise
                log.warning("reading type %s: %s (keeping its timeout)", type, err)
        return max(0.05, timeout * self.heartbeat_fraction)

    def _accept_loop(self, burst=False):
        types = list(self._handlers)
        backoff = Backoff(base=0.2, cap=10.0)
        turn = 0
        empty = set()  # burst: the types whose last accept, with nothing running, was empty
        while not self._stopping.is_set():
            with self._cond:
                free = self.concurrency - len(self._inflight)
                if free <= 0:
                    self._cond.wait(1.0)
                    continue
                idle = not self._inflight
            if burst and idle and len(empty) == len(types):
                log.info("burst: no job due and none running: stopping")
                self.stop()
                break
            t = types[turn % len(types)]
            turn += 1
            wait = self.poll_timeout if len(types) == 1 else min(1.0, self.poll_timeout)
            if burst:
                wait = 0 if idle else min(0.2, wait)
            cut = {"_on_connection": self._set_poll_conn} if isinstance(
                self.client, Client) else {}
            try:
                jobs = self.client.accept(
                    t, count=min(free, 100), timeout=wait, worker=self.worker_id,
                    worker_type=self.worker_type if self._token is not None else None, **cut)
            except errors.KvqError as err:
                if self._stopping.is_set():
                    break
                if not (err.retryable or isinstance(err, errors.NotFound)):
                    raise
                delay = backoff.next()
                log.warning("accept %s: %s (retrying in %.1f s)", t, err, delay)
                self._stopping.wait(delay)
                continue
            backoff.reset()
            if burst and (jobs or not idle):
                empty.clear()
            elif burst:
                empty.add(t)
            beat_every = self._beat_every(t) if jobs else None
            for raw in jobs:
                job = Job(self, raw, beat_every)
                if self._stopping.is_set():
                    self._hand_back(job)  # accepted as we were stopping: not started
                    continue
                with self._cond:
                    self._inflight.add(job)
                self._beat_kick.set()
                self._start_thread(self._run_job, "job", job)

    def _run_job(self, job, chain=True):
        """Runs jobs in this thread, one slot of ``concurrency``: ``job``, then, with
        ``chain``, each next job its finish took (one request per job while busy)."""
        while job is not None:
            job = self._run_one(job, chain)

    def _run_one(self, job, chain):
        nxt = None
        try:
            handler = self._handlers[job.type]
            with _otel.consumer_span(job.type, job.id, job.traceparent) as span:
                try:
                    result = handler(job)
                except Exception as exc:  # the handler failed, or snoozed
                    if job.cancelled.is_set() or not job._claim(_ENDING):
                        span.set("dropped")
                        log.info("dropped %s/%s (%s)", job.type, job.id, job.cancel_reason)
                        return None
                    if isinstance(exc, Snooze):
                        span.set("snoozed")
                        self._hand_back(job, exc.delay)
                        job._state = _DONE
                    else:
                        span.set("failed", exc)
                        self._fail(job, _error_of(exc))
                    return None
                if job.cancelled.is_set() or not job._claim(_ENDING):
                    span.set("dropped")
                    log.info("dropped %s/%s (%s)", job.type, job.id, job.cancel_reason)
                    return None
                span.set("succeeded")
            nxt = self._finish(job, result, take_next=chain and not self._stopping.is_set())
        finally:
            job._ended.set()
            with self._cond:
                if nxt is not None:
                    self._inflight.add(nxt)  # it takes over this job's slot
                self._inflight.discard(job)
                self._cond.notify_all()
        if nxt is not None:
            self._beat_kick.set()
            if self._stopping.is_set():
                with self._cond:
                    self._inflight.discard(nxt)
                    self._cond.notify_all()
                self._hand_back(nxt)  # taken as we were stopping: not started
                return None
        return nxt

    def _give_up_after(self, job):
        # After the type's timeout the server has given the run away anyway.
        return max(10.0, self._type_info.get(job.type, (30.0, 0))[0])

    def _finish(self, job, result, take_next=False):
        """Finishes the job; with ``take_next``, in the same request takes the next due job
        of the worker's types (without waiting: an idle worker waits in the accept loop) and returns
        it as a :class:`Job`, or None."""
        taken = []

        def call():
            # Only the first try asks for a next job: after an answer that was lost, a
            # second next could take another job while the first one taken waits unseen
            # (until its timeout) — a plain finish is the safe repeat.
            if take_next and not taken and self._next_supported:
                taken.append(True)
                try:
                    return self.client.finish(job.type, job.id, job.lock, result,
                                              next=self._next_request())
                except errors.InvalidArgument as err:
                    if err.code != "unknown_field":
                        raise
                    self._next_supported = False  # a server older than finish's "next"
            return self.client.finish(job.type, job.id, job.lock, result)

        nxt = None
        try:
            try:
                raw = self._retrying("finish %s/%s" % (job.type, job.id), call,
                                     self._give_up_after(job))
            except TypeError as err:  # the result is not JSON
                self._fail(job, {"message": "the handler's result is not JSON: %s" % err,
                                 "kind": "TypeError", "details": None})
                return None
            log.info("finished %s/%s", job.type, job.id)
            if raw is not None:
                nxt = Job(self, raw, self._beat_every(raw["type"]))
        except errors.Halted:
            log.info("finish %s/%s: halted (no longer ours)", job.type, job.id)
        except errors.KvqError as err:
            log.error("finish %s/%s failed: %s", job.type, job.id, err)
        finally:
            job._state = _DONE
        return nxt

    def _next_request(self):
        nxt = {"types": list(self._handlers), "timeout": 0, "worker": self.worker_id}
        if self._token is not None:
            nxt["worker_type"] = self.worker_type
        return nxt

    def _fail(self, job, error):
        try:
            answer = self._retrying(
                "fail %s/%s" % (job.type, job.id),
                lambda: self.client.fail(job.type, job.id, job.lock, error["message"],
                                         kind=error["kind"], details=error["details"],
                                         retry=error.get("retry"),
                                         retry_in=error.get("retry_in")),
                self._give_up_after(job))
            if answer.get("dead"):
                log.info("failed %s/%s: dead (%s)", job.type, job.id, error["message"])
            else:
                log.info("failed %s/%s: retries at %s (%s)", job.type, job.id,
                         answer.get("retry_at"), error["message"])
        except errors.Halted:
            log.info("fail %s/%s: halted (no longer ours)", job.type, job.id)
        except errors.KvqError as err:
            log.error("fail %s/%s failed: %s", job.type, job.id, err)
        finally:
            job._state = _DONE

    def _hand_back(self, job, delay=0):
        """Snooze a job: pending again after ``delay`` seconds (a job we will not run: at
        once), nothing counted."""
        try:
            self._retrying("hand back %s/%s" % (job.type, job.id),
                           lambda: self.client.snooze(job.type, job.id, job.lock, delay=delay),
                           give_up_after=10)
            log.info("handed back %s/%s%s", job.type, job.id,
                     " for %s s" % delay if delay else "")
        except errors.Halted:
            pass
        except errors.KvqError as err:
            log.error("handing back %s/%s failed: %s", job.type, job.id, err)

    def _heartbeat_loop(self):
        """Heartbeat every running job at its type's interval; fence it on 409 halted."""
        while True:
            self._beat_kick.clear()
            now = time.monotonic()
            wake = now + 1.0
            with self._cond:
                jobs = list(self._inflight)
            for job in jobs:
                if job._state != _RUNNING or job.cancelled.is_set():
                    continue
                if job._next_beat <= now:
                    try:
                        self.client.update(job.type, job.id, job.lock)
                        job._next_beat = time.monotonic() + job._beat_every
                    except errors.Halted:
                        log.info("%s/%s halted: no longer ours, cancelling its handler",
                                 job.type, job.id)
                        job._fence("halted")
                        continue
                    except errors.KvqError as err:
                        log.warning("heartbeat of %s/%s: %s", job.type, job.id, err)
                        job._next_beat = time.monotonic() + min(1.0, job._beat_every)
                wake = min(wake, job._next_beat)
            self._beat_kick.wait(max(0.01, wake - time.monotonic()))
            if self._threads_stop.is_set():
                return

    def _membership_loop(self):
        """Heartbeat the registration; if declared dead, cancel our jobs (the server gave
        them back) and register again."""
        every = self.health_timeout / 3
        while not self._threads_stop.wait(every):
            try:
                self.client.heartbeat_worker(self.worker_type, self.worker_id, self._token)
                continue
            except (errors.Halted, errors.WrongToken) as err:
                log.warning("worker %s was declared dead (%s): its jobs went back; "
                            "registering again", self.worker_id, err)
            except errors.KvqError as err:
                log.warning("worker heartbeat: %s", err)
                continue
            with self._cond:
                jobs = list(self._inflight)
            for job in jobs:
                job._fence("worker_lost")
            try:
                self._token = self.client.register_worker(
                    self.worker_type, self.worker_id, info=self.info,
                    health_timeout=self.health_timeout)
            except errors.KvqError as err:
                log.error("registering worker %s again: %s", self.worker_id, err)

    def _drain_on_stop(self):
        deadline = time.monotonic() + self.grace
        with self._cond:
            while self._inflight and not self._hard_exit.is_set():
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._cond.wait(min(left, 1.0))
            jobs = list(self._inflight)
        ending = []
        for job in jobs:
            if job._claim(_HANDED_BACK):
                self._hand_back(job)
                job._fence("shutdown")
            else:
                ending.append(job)
        for job in ending:  # those whose finish or fail was under way
            job._ended.wait(10)

    def _unregister(self):
        token, self._token = self._token, None
        try:
            if self._hard_exit.is_set():
                self.client.deregister_worker(self.worker_type, self.worker_id, token)
            else:
                self._retrying("unregister", lambda: self.client.deregister_worker(
                    self.worker_type, self.worker_id, token), give_up_after=10)
            log.info("worker %s unregistered", self.worker_id)
        except errors.KvqError as err:
            log.error("unregistering worker %s: %s", self.worker_id, err)
