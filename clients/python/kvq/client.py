# SPDX-License-Identifier: Apache-2.0
"""The kvq HTTP client: :class:`Client`, one method per route of docs/http-api.md."""

from __future__ import annotations

import base64
import collections
import http.client
import json
import socket
import ssl
import time
import urllib.parse
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, TypedDict, Union

from . import _otel, errors

__all__ = ["Client", "Page", "DEFAULT_URL", "job_body", "JobRef", "Dependency", "BatchCallback",
           "BatchCounts", "Batch"]

DEFAULT_URL = "http://127.0.0.1:7411"

_UNSET: Any = object()

#: A JSON object as the API sends it (a job, a type, an answer).
JSONObject = Dict[str, Any]



class JobRef(TypedDict):
    """A job named by its type and id: an entry of ``depends_on``, a batch's dead member."""
    type: str
    id: str


class Dependency(TypedDict):
    """One entry of :meth:`Client.dependencies`: ``resolved`` is ``"succeeded"``, ``"dead"``
    or ``"cancelled"`` (how the dependency had ended when it resolved), ``None`` while it
    has not; ``job`` the dependency as :meth:`Client.get` shows it now, ``None`` once
    removed."""
    type: str
    id: str
    resolved: Optional[str]
    job: Optional[Dict[str, Any]]


class BatchCallback(TypedDict, total=False):
    """A batch's callback job: its ``type`` and ``id``, and ``data`` (a dict)."""
    type: str
    id: str
    data: Dict[str, Any]


class BatchCounts(TypedDict):
    """A batch's counts: every job that joined, those not yet ended, those ended by
    outcome."""
    members: int
    unfinished: int
    succeeded: int
    dead: int
    cancelled: int


class Batch(TypedDict):
    """A batch as the server shows it (docs/http-api.md "Batches"): ``state`` is ``open``,
    ``sealed``, ``fired`` or ``skipped``; ``settled_at`` (ms) is ``None`` until it fired or
    was skipped."""
    id: str
    callback: BatchCallback
    on: str
    state: str
    sealed: bool
    fired: bool
    counts: BatchCounts
    created_at: int
    settled_at: Optional[int]


def _job_ref(ref):
    """A ``depends_on`` entry: a ``{"type", "id"}`` dict or a ``(type, id)`` pair."""
    if isinstance(ref, dict):
        return {"type": ref["type"], "id": ref["id"]}
    type, id = ref
    return {"type": type, "id": id}


def _workflow_fields(body, depends_on, on_dependency_failure, batch):
    if depends_on is not None:
        body["depends_on"] = [_job_ref(ref) for ref in depends_on]
    if on_dependency_failure is not None:
        body["on_dependency_failure"] = on_dependency_failure
    if batch is not None:
        body["batch"] = batch


Page = collections.namedtuple("Page", ["jobs", "next_cursor"])
Page.__doc__ = """One page of :meth:`Client.list`: ``jobs`` (a list of job dicts, in id order) and
``next_cursor`` (pass it as ``cursor`` for the next page; ``""`` after the last page)."""


def _q(segment):
    if not isinstance(segment, str) or not segment:
        raise ValueError("a type, id or worker id must be a non-empty string, not %r" % (segment,))
    return urllib.parse.quote(segment, safe="")


def _drop_unset(body):
    return {k: v for k, v in body.items() if v is not _UNSET}


def _put_body(request, body):
    """Bytes data in a request: a str goes as ``body`` (its UTF-8 bytes), bytes as
    ``body_base64``."""
    if body is None:
        return
    if isinstance(body, str):
        request["body"] = body
    elif isinstance(body, (bytes, bytearray, memoryview)):
        request["body_base64"] = base64.b64encode(bytes(body)).decode("ascii")
    else:
        raise TypeError("a job's body is str or bytes, not %s" % type(body).__name__)


def job_body(job):
    """The bytes of a job whose ``data_format`` is ``"bytes"`` (a job dict as the server shows
    it: ``body`` or ``body_base64``), or None for a job of JSON data."""
    if job.get("data_format") != "bytes":
        return None
    if job.get("body") is not None:
        return job["body"].encode("utf-8")
    return base64.b64decode(job.get("body_base64") or "")


_COUNTS = ("pending", "scheduled", "running", "finished", "dead", "cancelled")


def _accept_fields(body, **fields):
    for key, value in fields.items():
        if value is not None:
            body[key] = value
    return body


class Client:
    """A client of one kvq server (or any of several sharing a store: they are alike).

    Thread-safe: every call opens its own connection, so one ``Client`` may be shared by
    threads. Every method raises a :class:`kvq.KvqError` subclass on an error answer
    (:class:`kvq.NotFound`, :class:`kvq.Halted`, :class:`kvq.Unavailable`, ...) and
    :class:`kvq.NetworkError` when no answer arrived; the client itself never retries.

    Args:
        url: the server's base URL, ``http://HOST:PORT`` or ``https://HOST:PORT``.
        token: the server's bearer token, if it has one (``kvq serve --token``).
        timeout: seconds to wait for an answer (long polls wait that much longer than the
            time they ask the server to wait).
        ssl_context: for ``https://``, an :class:`ssl.SSLContext` saying whom to trust and
            which client certificate to present; default: the system's trusted CAs.
    """

    def __init__(self, url: str = DEFAULT_URL, token: Optional[str] = None, timeout: float = 30.0,
                 ssl_context: Optional[ssl.SSLContext] = None) -> None:
        parts = urllib.parse.urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError("a kvq URL is http://HOST:PORT or https://HOST:PORT, not %r" % url)
        self.url = url.rstrip("/")
        self.token = token
        self.timeout = timeout
        self._https = parts.scheme == "https"
        self._host = parts.hostname
        self._port = parts.port or (443 if self._https else 80)
        self._prefix = parts.path.rstrip("/")
        if self._https and ssl_context is None:
            ssl_context = ssl.create_default_context()
        self._ssl_context = ssl_context

    def __repr__(self):
        return "kvq.Client(%r)" % self.url

    # -- transport ---------------------------------------------------------------------
    def _connection(self, timeout):
        if self._https:
            return http.client.HTTPSConnection(self._host, self._port, timeout=timeout,
                                               context=self._ssl_context)
        return http.client.HTTPConnection(self._host, self._port, timeout=timeout)

    def _headers(self, accept="application/json"):
        h = {"Accept": accept}
        if self.token:
            h["Authorization"] = "Bearer " + self.token
        return h

    def _target(self, path, query=None):
        target = self._prefix + path
        if query:
            query = {k: v for k, v in query.items() if v is not None}
            if query:
                target += "?" + urllib.parse.urlencode(query)
        return target

    def _request(self, method, path, body=None, query=None, timeout=None, on_connection=None,
                 extra_headers=None):
        """One request; returns (status, parsed body or None) for 2xx, raises otherwise.
        ``on_connection(conn)`` is called with the connection once it is open, and with None
        once it is closed (so another thread can cut a long poll short)."""
        headers = self._headers()
        if extra_headers:
            headers.update(extra_headers)
        data = None
        if body is not None:
            try:
                data = json.dumps(body, allow_nan=False).encode()
            except (TypeError, ValueError) as err:
                raise TypeError("the request body is not JSON: %s" % err) from None
            headers["Content-Type"] = "application/json"
        conn = self._connection(self.timeout if timeout is None else timeout)
        try:
            try:
                if on_connection is not None:
                    conn.connect()
                    on_connection(conn)
                conn.request(method, self._target(path, query), body=data, headers=headers)
                resp = conn.getresponse()
                raw = resp.read()
            except (OSError, http.client.HTTPException) as err:
                raise errors.NetworkError("%s %s: no answer from %s: %s"
                                          % (method, path, self.url, err or type(err).__name__)) from err
        finally:
            conn.close()
            if on_connection is not None:
                on_connection(None)
        parsed = None
        if raw:
            try:
                parsed = json.loads(raw)
            except ValueError:
                parsed = {"message": raw[:200].decode(errors="replace")}
        if 200 <= resp.status < 300:
            return resp.status, parsed
        raise errors.error_for(resp.status, parsed)

    # -- health ------------------------------------------------------------------------
    def health(self) -> JSONObject:
        """``GET /healthz``: the server's health, e.g. ``{"status": "ok", "store": ...}``.
        Raises :class:`kvq.Unavailable` when the store cannot serve."""
        return self._request("GET", "/healthz")[1]

    # -- types -------------------------------------------------------------------------
    def put_type(self, type: str, timeout: Optional[float] = None, *,
                 max_attempts: Optional[int] = None, backoff: Optional[JSONObject] = None,
                 finished_retention: Optional[float] = _UNSET, max_lost_runs: Optional[int] = _UNSET,
                 max_running: Optional[int] = _UNSET, rate: Optional[JSONObject] = _UNSET,
                 max_running_per_group: Optional[int] = _UNSET) -> JSONObject:
        """Create a job type or change its settings; returns the type (as :meth:`get_type`).

        Args:
            type: the type's name (1-64 bytes of ``A-Z a-z 0-9 _ . : -``).
            timeout: seconds a worker may go without an update before its run is lost
                (required to create a type).
            max_attempts: attempts before a job ends dead (default 25).
            backoff: a dict of ``base``, ``factor``, ``cap``, ``jitter`` (the retry delay).
            finished_retention: seconds finished jobs are kept, or ``None`` for ever.
            max_lost_runs: lost runs in a row before a job ends dead, or ``None`` for never.
            max_running: at most this many of the type's jobs run at once, across every
                server (1-1,000,000), or ``None`` for no limit.
            rate: ``{"limit": N, "period_ms": MS}``: at most ``limit`` accepts (1-1,000) in
                any window of ``period_ms`` milliseconds (at most a day), or ``None`` for no
                limit.
            max_running_per_group: at most this many jobs of any one group (see
                :meth:`add`'s ``group``) run at once, or ``None`` for no limit.
        Omitted settings are left as they are.

        Example::

            client.put_type("email", 30, max_running=4, rate={"limit": 10, "period_ms": 1000})
        """
        body = _drop_unset({"timeout": timeout if timeout is not None else _UNSET,
                            "max_attempts": max_attempts if max_attempts is not None else _UNSET,
                            "backoff": backoff if backoff is not None else _UNSET,
                            "finished_retention": finished_retention,
                            "max_lost_runs": max_lost_runs,
                            "max_running": max_running,
                            "rate": rate,
                            "max_running_per_group": max_running_per_group})
        return self._request("PUT", "/v1/types/" + _q(type), body)[1]

    def pause_type(self, type: str, for_ms: Optional[int] = None) -> JSONObject:
        """Pause the type: accepts of it get nothing (waiting long-polls included) until
        :meth:`resume_type`, or for ``for_ms`` milliseconds (its ``paused_until``). Adds are
        still taken and running jobs go on. Returns the type (``"paused": True``). Raises
        :class:`kvq.NotFound`.

        Example::

            client.pause_type("email", for_ms=60000)   # a minute; None: until resumed
        """
        body = {} if for_ms is None else {"for_ms": for_ms}
        return self._request("POST", "/v1/types/%s/pause" % _q(type), body)[1]

    def resume_type(self, type: str) -> JSONObject:
        """End the type's pause (nothing if it is not paused); waiting accepts get its jobs
        at once. Returns the type. Raises :class:`kvq.NotFound`."""
        return self._request("POST", "/v1/types/%s/resume" % _q(type))[1]

    def groups(self, type: str, *, limit: Optional[int] = None, after: Optional[str] = None) -> JSONObject:
        """The type's groups that have pending or running jobs, by name: a list of
        ``{"group", "running", "pending", "full", "in_turn_at"}`` (``full``: it holds
        ``max_running_per_group`` running jobs; ``in_turn_at``: when it is next in turn, ms,
        or None). ``limit`` groups at a time (default 100), after the group ``after``.
        Raises :class:`kvq.NotFound` if the type does not exist."""
        return self._request("GET", "/v1/types/%s/groups" % _q(type),
                             query={"limit": limit, "after": after or None})[1]["groups"]

    def iter_groups(self, type: str, *, page_size: Optional[int] = None) -> Iterator[JSONObject]:
        """Every group of the type (as :meth:`groups`), page by page: a generator."""
        after, size = None, page_size or 100
        while True:
            body = self._request("GET", "/v1/types/%s/groups" % _q(type),
                                 query={"limit": size, "after": after})[1]
            page = body["groups"]
            yield from page
            # The server says where the next page starts (next_after, "" at the end); a
            # server that does not is read page by page until one comes back short.
            after = body.get("next_after", page[-1]["group"] if len(page) >= size else "")
            if not page or not after:
                return

    # -- schedules ---------------------------------------------------------------------
    def put_schedule(self, name: str, type: str, cron: str, *, timezone: Optional[str] = None,
                     data: Any = None, priority: Optional[int] = None,
                     catch_up: Optional[bool] = None) -> JSONObject:
        """Create or replace the schedule ``name``: a job of ``type`` is added at every time
        ``cron`` names (five crontab fields, six with seconds first, or ``@daily`` ...), its
        id ``NAME@YYYY-MM-DDTHH:MM:SSZ``. Returns the schedule (as :meth:`get_schedule`).

        Args:
            timezone: an IANA zone the cron's times are wall times in (default ``"UTC"``).
            data: each job's data (a dict; default ``{}``).
            priority: each job's priority (default 0).
            catch_up: ``"one"`` (the default), ``"all"`` or ``"none"``: what becomes of
                occurrences found late.
        Raises :class:`kvq.InvalidArgument` (bad name, cron, timezone ...),
        :class:`kvq.NotFound` if the type does not exist.

        Example::

            client.put_schedule("nightly-report", "report", "0 3 * * *",
                                timezone="Europe/Paris", data={"kind": "daily"})
        """
        body = {"type": type, "cron": cron}
        for key, value in (("timezone", timezone), ("data", data), ("priority", priority),
                           ("catch_up", catch_up)):
            if value is not None:
                body[key] = value
        return self._request("PUT", "/v1/schedules/" + _q(name), body)[1]

    def get_schedule(self, name: str) -> JSONObject:
        """The schedule: ``{"name", "type", "cron", "timezone", "data", "priority",
        "catch_up", "next_run", "last_run", "last_job_id", "enqueued", "skipped",
        "last_error", "created_at", "updated_at", "next_runs"}`` (``next_runs``: its next
        five times after now, ms). Raises :class:`kvq.NotFound`."""
        return self._request("GET", "/v1/schedules/" + _q(name))[1]

    def schedules(self) -> List[JSONObject]:
        """Every schedule, by name (as :meth:`get_schedule`, without ``next_runs``)."""
        return self._request("GET", "/v1/schedules")[1]["schedules"]

    def remove_schedule(self, name: str) -> None:
        """Delete a schedule; the jobs it enqueued stay. Raises :class:`kvq.NotFound`."""
        self._request("DELETE", "/v1/schedules/" + _q(name))

    def get_type(self, type: str) -> JSONObject:
        """The type's settings: ``{"type", "timeout", "finished_retention",
        "max_lost_runs", "max_attempts", "backoff", "paused", "paused_until", "max_running",
        "rate", "max_running_per_group"}`` (``paused_until``: when a pause given ``for_ms``
        ends, ms; ``max_running``, ``rate`` and ``max_running_per_group`` None when not set).
        Raises :class:`kvq.NotFound`."""
        return self._request("GET", "/v1/types/" + _q(type))[1]

    def list_types(self) -> List[JSONObject]:
        """Every type that has a timeout, as a list of dicts like :meth:`get_type`'s."""
        return self._request("GET", "/v1/types")[1]["types"]

    def delete_type(self, type: str) -> None:
        """Delete a type that has no jobs. Raises :class:`kvq.TypeHasJobs` otherwise (empty
        it first with :meth:`remove_all`), :class:`kvq.NotFound`."""
        self._request("DELETE", "/v1/types/" + _q(type))

    def pending_count(self, type: str, limit: Optional[int] = None) -> int:
        """How many due pending jobs the type has (counted up to ``limit``)."""
        return self._request("GET", "/v1/types/%s/pending" % _q(type),
                             query={"limit": limit})[1]["pending"]

    def stats(self) -> JSONObject:
        """The server's counters and counts in one read-only call (``GET /v1/stats``):
        ``{"time", "accepts", "finishes", "types": [...], "worker_types": [...]}``, each type
        with its settings and its ``pending``, ``scheduled``, ``running``, ``finished``,
        ``dead`` and ``cancelled`` counts (each counted up to 100,000)."""
        return self._request("GET", "/v1/stats")[1]

    def counts(self, type: str) -> Dict[str, int]:
        """How many jobs of ``type`` are in each state: ``{"pending", "scheduled",
        "running", "finished", "dead", "cancelled"}`` (``pending`` includes ``scheduled``,
        ``finished`` includes ``dead`` and ``cancelled``), from :meth:`stats`. Raises
        :class:`kvq.NotFound` for a type without a timeout."""
        for t in self.stats()["types"]:
            if t["type"] == type:
                return {k: t.get(k, 0) for k in _COUNTS}
        raise errors.NotFound("type %s does not exist" % type, status=404, code="not_found")

    # -- producing ---------------------------------------------------------------------
    def add(self, type: str, id: str, data: Any = None, *, priority: Optional[int] = None,
            scheduled_time: Optional[int] = None, if_exists: Optional[str] = None,
            group: Optional[str] = None, timeout: Optional[float] = None,
            body: Union[bytes, str, None] = None, traceparent: Optional[str] = None,
            depends_on: Optional[Sequence[Any]] = None,
            on_dependency_failure: Optional[str] = None,
            batch: Optional[str] = None) -> bool:
        """Add a job; returns True if it was added or changed, False if ``if_exists="keep"``
        left an existing job alone.

        Args:
            type: the job's type (it must have a timeout: else :class:`kvq.NoTimeout`).
            id: the job's id, unique within its type.
            data: the job's input, a JSON object (default ``{}``).
            priority: lower runs first (default 0).
            scheduled_time: when it falls due, in milliseconds since the epoch (default now).
            if_exists: ``"update"`` (the default: replace a pending job, resubmit a running
                one, start a finished one over) or ``"keep"`` (leave an existing job as it is).
            group: the job's group key (a tenant, a customer), 1-128 bytes; default none.
                Accepts take turns between a type's groups, and the type's
                ``max_running_per_group`` caps each group's running jobs.
            timeout: the job's own activity timeout in seconds (more than 0, at most 7 days),
                replacing its type's for this job; default the type's.
            body: bytes data instead of ``data`` (``str`` is sent as its UTF-8 bytes):
                the job's ``data_format`` is then ``"bytes"``, its data ``None``, and
                :func:`kvq.job_body` gives its bytes back.
            traceparent: a W3C trace context (``00-<32 hex>-<16 hex>-<2 hex>``) to keep with
                the job and hand to its worker (an invalid one is
                :class:`kvq.InvalidArgument`). Without it, when OpenTelemetry's API is
                importable, the current span's context goes as the request's
                ``traceparent`` header instead (which a server ignores if invalid).
            depends_on: jobs this one waits for, each ``{"type", "id"}`` (or a ``(type, id)``
                pair), at most 100: the job is ``waiting`` until they have ended (see
                docs/workflows.md). A dependency that does not exist is :class:`kvq.NotFound`.
            on_dependency_failure: ``"cancel"`` (the default: a dependency that ends dead or
                cancelled cancels this job) or ``"run"`` (it counts as resolved).
            batch: the id of an open batch (:meth:`put_batch`) the job joins; a sealed one
                is :class:`kvq.WrongState`.

        Example::

            client.add("report", "r-1", {"month": "2026-11"}, group="tenant-42")
            client.add("report", "weekly", depends_on=[{"type": "fetch", "id": "eu"}])
        """
        request = {"id": id}
        if body is None:
            request["data"] = {} if data is None else data
        elif data is not None:
            raise ValueError("give data or body, not both")
        _put_body(request, body)
        if timeout is not None:
            request["timeout"] = timeout
        body = request
        if priority is not None:
            body["priority"] = priority
        if scheduled_time is not None:
            body["scheduled_time"] = scheduled_time
        if group is not None:
            body["group"] = group
        if if_exists is not None:
            body["if_exists"] = if_exists
        if traceparent is not None:
            body["traceparent"] = traceparent
        _workflow_fields(body, depends_on, on_dependency_failure, batch)
        return self._request("POST", "/v1/jobs/" + _q(type), body,
                             extra_headers=_otel.trace_headers())[1]["added"]

    def add_many(self, type: str, jobs: Sequence[JSONObject], *,
                 if_exists: Optional[str] = None) -> JSONObject:
        """Add up to 1,000 jobs in one transaction (all or none).

        Args:
            jobs: dicts ``{"id", "data", "priority"?, "scheduled_time"?, "if_exists"?,
                "group"?, "traceparent"?, "depends_on"?, "on_dependency_failure"?,
                "batch"?}`` (as :meth:`add` takes them; ``depends_on`` may also hold
                ``(type, id)`` pairs, and may name jobs of this same add) or ``(id, data)``
                pairs. The current span's
                context, with OpenTelemetry's API, goes as the ``traceparent`` header, for
                the jobs that have none of their own.
            if_exists: the default for jobs that name none (see :meth:`add`).
        Returns:
            ``{"added": N, "kept": [ids that "keep" left alone]}``.
        """
        entries = []
        for job in jobs:
            if isinstance(job, dict):
                entry = dict(job)
                entry.setdefault("data", {})
                if entry.get("depends_on") is not None:
                    entry["depends_on"] = [_job_ref(ref) for ref in entry["depends_on"]]
            else:
                jid, data = job
                entry = {"id": jid, "data": {} if data is None else data}
            entries.append(entry)
        body = {"jobs": entries}
        if if_exists is not None:
            body["if_exists"] = if_exists
        return self._request("POST", "/v1/jobs/%s/batch" % _q(type), body,
                             extra_headers=_otel.trace_headers())[1]

    # -- reading -----------------------------------------------------------------------
    def get(self, type: str, id: str) -> JSONObject:
        """The job, as a dict (``state``, ``outcome``, ``data``, ``result``, ``attempts``,
        ``errors``, ...; docs/http-api.md "Jobs"). Raises :class:`kvq.NotFound`."""
        return self._request("GET", "/v1/jobs/%s/%s" % (_q(type), _q(id)))[1]

    def list(self, type: str, state: Optional[str] = None, *, worker: Optional[str] = None,
             worker_type: Optional[str] = None, limit: Optional[int] = None,
             cursor: Optional[str] = None) -> Page:
        """One page of the type's jobs, in id order, as a :class:`Page`.

        Args:
            state: ``pending``, ``running``, ``finished``, ``scheduled``, ``due``,
                ``succeeded``, ``dead`` or ``cancelled`` (default: all).
            worker, worker_type: keep only the jobs with that value.
            limit: jobs per page, 1-10,000 (default 100).
            cursor: the previous page's ``next_cursor``.
        """
        body = self._request("GET", "/v1/jobs/" + _q(type),
                             query={"state": state, "worker": worker, "worker_type": worker_type,
                                    "limit": limit, "cursor": cursor or None})[1]
        return Page(body["jobs"], body.get("next_cursor", ""))

    def iter_jobs(self, type: str, state: Optional[str] = None, *, page_size: Optional[int] = None,
                  **filters: Any) -> Iterator[JSONObject]:
        """Every job of the type (filtered as :meth:`list`), page by page: a generator."""
        cursor = None
        while True:
            page = self.list(type, state, limit=page_size, cursor=cursor, **filters)
            yield from page.jobs
            if not page.next_cursor:
                return
            cursor = page.next_cursor

    def dependencies(self, type: str, id: str) -> List[Dependency]:
        """The dependencies the job was added with (``depends_on``), in (type, id) order:
        each ``{"type", "id", "resolved", "job"}`` (see :class:`Dependency`; ``job["result"]``
        is what the dependency's worker returned). ``[]`` for a job added without any.
        Raises :class:`kvq.NotFound`."""
        return self._request("GET", "/v1/jobs/%s/%s/dependencies" % (_q(type), _q(id)))[1][
            "dependencies"]

    # -- batches -----------------------------------------------------------------------
    def put_batch(self, id: str, callback: BatchCallback, on: Optional[str] = None) -> Batch:
        """Create the batch ``id`` (open), or change the callback of an open one; returns
        the batch. Once it is sealed and every member has ended, the server adds the job
        ``callback`` (``{"type", "id", "data"?}``) once, its data with a ``batch`` field
        of counts. ``on``: ``"complete"`` (the default: whatever the members' outcomes) or
        ``"success"`` (only if every member succeeded). Raises :class:`kvq.NotFound` if the
        callback's type does not exist, :class:`kvq.WrongState` for another callback on a
        sealed batch."""
        body: Dict[str, Any] = {"callback": dict(callback)}
        if on is not None:
            body["on"] = on
        return self._request("PUT", "/v1/batches/" + _q(id), body)[1]

    def seal_batch(self, id: str) -> Batch:
        """Seal the batch: no more jobs may join it; if every member has ended (or it has
        none) its callback is added now. Returns the batch. Raises :class:`kvq.NotFound`."""
        return self._request("POST", "/v1/batches/%s/seal" % _q(id), {})[1]

    def get_batch(self, id: str) -> Batch:
        """The batch (see :class:`Batch`). Raises :class:`kvq.NotFound`."""
        return self._request("GET", "/v1/batches/" + _q(id))[1]

    def fan_out(self, batch_id: str, type: str, jobs: Sequence[Any], *,
                callback: BatchCallback, on: Optional[str] = None,
                if_exists: Optional[str] = None) -> Batch:
        """Fan out and in: put the batch ``batch_id`` with ``callback`` (and ``on``), add
        ``jobs`` of ``type`` (as :meth:`add_many` takes them) with ``batch`` set, in batch
        adds of at most 1,000, then seal it; returns the sealed batch. Each step is its own
        request: should one fail, the batch is left unsealed, and an unsealed batch never
        fires.

        Example::

            client.fan_out("nightly", "resize", [{"id": i, "data": {}} for i in ids],
                           callback={"type": "report", "id": "nightly"})
        """
        self.put_batch(batch_id, callback, on)
        entries: List[JSONObject] = []
        for job in jobs:
            if isinstance(job, dict):
                entry = dict(job)
            else:
                jid, data = job
                entry = {"id": jid, "data": {} if data is None else data}
            entry["batch"] = batch_id
            entries.append(entry)
        for start in range(0, len(entries), 1000):
            self.add_many(type, entries[start:start + 1000], if_exists=if_exists)
        return self.seal_batch(batch_id)

    # -- changing jobs -----------------------------------------------------------------
    def remove(self, type: str, id: str) -> None:
        """Delete a job (a running job's worker is halted). Raises :class:`kvq.NotFound`."""
        self._request("DELETE", "/v1/jobs/%s/%s" % (_q(type), _q(id)))

    def remove_all(self, type: str) -> int:
        """Delete every job of the type; returns how many were removed."""
        return self._request("DELETE", "/v1/types/%s/jobs" % _q(type))[1]["removed"]

    def cancel(self, type: str, id: str) -> JSONObject:
        """Cancel a job: it ends with outcome ``"cancelled"`` (a running job's worker is
        halted). Returns the job. Raises :class:`kvq.WrongState` if it already finished."""
        return self._request("POST", "/v1/jobs/%s/%s/cancel" % (_q(type), _q(id)))[1]

    def rerun(self, type: str, id: str, *, scheduled_time: Optional[int] = None,
              priority: Optional[int] = None) -> JSONObject:
        """Run a finished job (any outcome) again, its attempts starting over; returns the
        job. Raises :class:`kvq.WrongState` if it is not finished."""
        body = {}
        if scheduled_time is not None:
            body["scheduled_time"] = scheduled_time
        if priority is not None:
            body["priority"] = priority
        return self._request("POST", "/v1/jobs/%s/%s/rerun" % (_q(type), _q(id)), body)[1]

    def rerun_all(self, type: str, outcome: str = "dead") -> Any:
        """Rerun every job of the type that ended ``outcome`` (``"dead"`` or
        ``"cancelled"``); returns how many."""
        return self._request("POST", "/v1/types/%s/rerun" % _q(type),
                             {"outcome": outcome})[1]["rerun"]

    # -- watching ----------------------------------------------------------------------
    def wait(self, type: str, id: str, state: str = "finished",
             timeout: float = 30) -> Optional[JSONObject]:
        """Long-poll until the job is in ``state`` (``pending``, ``running`` or ``finished``)
        or removed; returns the job event (``{"found": True, "state", "outcome", "result",
        ...}`` or ``{"found": False}``), or ``None`` if ``timeout`` seconds (at most 300)
        passed first. Note that the server's wait, begun on a job already finished, waits
        for its next change: :meth:`result` and :meth:`events` see the current state first."""
        status, body = self._request("GET", "/v1/jobs/%s/%s/wait" % (_q(type), _q(id)),
                                     query={"state": state, "timeout": timeout},
                                     timeout=timeout + self.timeout)
        return body if status == 200 else None

    def events(self, type: str, id: str, follow: bool = False,
               timeout: Optional[float] = None) -> Iterator[JSONObject]:
        """Follow a job's changes: a generator of job events (dicts as :meth:`wait`
        returns), the current state first. It ends after ``finished`` or when the job is
        removed (``found: False``); with ``follow=True`` only when it is removed. With
        ``timeout`` (seconds) it raises :class:`TimeoutError` once that passes. Close the
        generator (or leave the ``for`` loop) to stop early."""
        path = "/v1/jobs/%s/%s/events" % (_q(type), _q(id))
        deadline = None if timeout is None else time.monotonic() + timeout
        for name, data in self._sse(path, {"follow": "true" if follow else None}, deadline):
            if name == "job":
                yield data

    def worker_events(self, worker_type: str, timeout: Optional[float] = None) -> Iterator[JSONObject]:
        """Follow a worker type's membership: a generator of ``{"version", "workers"}``,
        now, then on every change. With ``timeout`` it raises :class:`TimeoutError`."""
        deadline = None if timeout is None else time.monotonic() + timeout
        for name, data in self._sse("/v1/workers/%s/events" % _q(worker_type), None, deadline):
            if name == "membership":
                yield data

    def _sse(self, path, query, deadline):
        def read_timeout():
            limit = 60.0  # the server sends a keep-alive every 15 s
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError("no end of %s within its timeout" % path)
                limit = min(limit, left)
            return limit

        conn = self._connection(read_timeout())
        try:
            try:
                conn.connect()
                sock = conn.sock  # the response owns it once it reads to the end
                conn.request("GET", self._target(path, query),
                             headers=self._headers("text/event-stream"))
                resp = conn.getresponse()
            except (OSError, http.client.HTTPException) as err:
                raise errors.NetworkError("GET %s: no answer from %s: %s"
                                          % (path, self.url, err)) from err
            if resp.status != 200:
                raw = resp.read()
                try:
                    parsed = json.loads(raw) if raw else None
                except ValueError:
                    parsed = None
                raise errors.error_for(resp.status, parsed)
            name, data = None, []
            while True:
                sock.settimeout(read_timeout())
                try:
                    line = resp.readline()
                except socket.timeout:
                    if deadline is not None and time.monotonic() >= deadline:
                        raise TimeoutError("no end of %s within its timeout" % path) from None
                    raise errors.NetworkError("GET %s: the event stream went silent" % path)
                except (OSError, http.client.HTTPException) as err:
                    raise errors.NetworkError("GET %s: the event stream broke: %s"
                                              % (path, err)) from err
                if not line:
                    return
                line = line.decode("utf-8", errors="replace").rstrip("\r\n")
                if line == "":
                    if data:
                        yield name or "message", json.loads("\n".join(data))
                    name, data = None, []
                    continue
                if line.startswith(":"):
                    continue
                field, _, value = line.partition(":")
                value = value[1:] if value.startswith(" ") else value
                if field == "event":
                    name = value
                elif field == "data":
                    data.append(value)
        finally:
            conn.close()

    def result(self, type: str, id: str, timeout: Optional[float] = None) -> Any:
        """Wait for the job to end and return its result (what the worker's handler
        returned).

        Raises:
            kvq.JobDead: it ended dead; ``.last_error`` is its last error.
            kvq.JobCancelled: it was cancelled.
            kvq.NotFound: it does not exist, or was removed while waiting.
            TimeoutError: ``timeout`` seconds passed first.
        """
        for event in self.events(type, id, timeout=timeout):
            if not event.get("found", True):
                raise errors.NotFound("job %s/%s was removed" % (type, id), status=404,
                                      code="not_found")
            if event.get("state") != "finished":
                continue
            outcome = event.get("outcome")
            if outcome == "succeeded":
                return event.get("result")
            job = self.get(type, id)
            if outcome == "cancelled":
                raise errors.JobCancelled(job)
            raise errors.JobDead(job)
        # The stream ended without a finished event: the job went away meanwhile.
        raise errors.NotFound("job %s/%s was removed" % (type, id), status=404, code="not_found")

    # -- workers' job calls ------------------------------------------------------------
    def accept(self, type: str, count: int = 1, timeout: float = 0, *, worker: Optional[str] = None,
               worker_type: Optional[str] = None, max_priority: Optional[int] = None,
               max_scheduled_time: Optional[int] = None,
               _on_connection: Optional[Callable[[Any], None]] = None) -> List[JSONObject]:
        """Take up to ``count`` (1-100) due jobs, waiting up to ``timeout`` seconds (at most
        300) for the first. Returns a list of ``{"type", "id", "lock", "data"}`` (empty if
        none became due in time). Most programs use :class:`kvq.Worker` instead."""
        body = _accept_fields({"count": count, "timeout": timeout}, worker=worker,
                              worker_type=worker_type, max_priority=max_priority,
                              max_scheduled_time=max_scheduled_time)
        status, answer = self._request("POST", "/v1/accept/" + _q(type), body,
                                       timeout=timeout + self.timeout,
                                       on_connection=_on_connection)
        return answer["jobs"] if status == 200 and answer else []

    def accept_any(self, types: Sequence[str], timeout: float = 0, *, worker: Optional[str] = None,
                   worker_type: Optional[str] = None, max_priority: Optional[int] = None,
                   max_scheduled_time: Optional[int] = None) -> List[JSONObject]:
        """Take one due job of any of ``types`` (1-64 type names): the best priority across
        them, then the earliest scheduled time; waits up to ``timeout`` seconds (at most 300)
        for one. Returns a list of at most one job dict (its ``type`` says which)."""
        body = _accept_fields({"types": list(types), "timeout": timeout}, worker=worker,
                              worker_type=worker_type, max_priority=max_priority,
                              max_scheduled_time=max_scheduled_time)
        status, answer = self._request("POST", "/v1/accept", body, timeout=timeout + self.timeout)
        return answer["jobs"] if status == 200 and answer else []

    def _job_call(self, type, id, verb, body):
        return self._request("POST", "/v1/jobs/%s/%s/%s" % (_q(type), _q(id), verb), body)[1]

    def update(self, type: str, id: str, lock: str, *, progress: Any = _UNSET,
               data: Optional[JSONObject] = None, body: Union[bytes, str, None] = None) -> bool:
        """Heartbeat a running job (and set its ``progress``, any JSON value, and its data if
        given: ``data``, or ``body`` for a job of bytes); returns whether an add resubmitted
        it meanwhile. Raises :class:`kvq.Halted` when the job is no longer this lock's."""
        request = _drop_unset({"lock": lock, "progress": progress})
        if data is not None:
            request["data"] = data
        _put_body(request, body)
        return self._job_call(type, id, "update", request).get("resubmitted", False)

    def finish(self, type: str, id: str, lock: str, result: Any = None, *,
               data: Optional[JSONObject] = None, body: Union[bytes, str, None] = None,
               next: Optional[JSONObject] = None) -> Optional[JSONObject]:
        """End a running job as succeeded with ``result`` (any JSON value); ``data`` (or
        ``body``, for a job of bytes) replaces its data. Raises :class:`kvq.Halted`. A repeat
        with the same lock is harmless.

        With ``next`` (a dict: ``types`` (default the job's type), ``timeout`` (seconds,
        default 0), ``worker``, ``worker_type``, ``max_priority``, ``max_scheduled_time``),
        it also accepts the worker's next job in the same request and transaction, and
        returns it (a job dict as :meth:`accept` gives) or None when none was due within
        ``next["timeout"]``; the finish stands either way. Without ``next`` it returns None.

        Example::

            job = client.accept("resize", timeout=30, worker="w1")[0]
            while job is not None:
                job = client.finish(job["type"], job["id"], job["lock"], do(job),
                                    next={"timeout": 30, "worker": "w1"})
        """
        request = {"lock": lock, "result": result}
        if data is not None:
            request["data"] = data
        _put_body(request, body)
        if next is None:
            self._job_call(type, id, "finish", request)
            return None
        request["next"] = dict(next)
        answer = self._request("POST", "/v1/jobs/%s/%s/finish" % (_q(type), _q(id)), request,
                               timeout=float(next.get("timeout") or 0) + self.timeout)[1]
        return answer.get("next")

    def fail(self, type: str, id: str, lock: str, message: str, *, kind: Optional[str] = None,
             details: Any = None, retry_in: Optional[float] = None,
             retry: Optional[bool] = None) -> JSONObject:
        """Fail this attempt of a running job: the error (``message``, ``kind``,
        ``details``) is recorded and the job retried after ``retry_in`` seconds or its
        type's backoff, or ends dead when ``retry`` is False or its attempts are used up.
        Returns ``{"dead": bool, "retry_at": ms or None, "attempt": n}``. Raises
        :class:`kvq.Halted`."""
        error = {"message": message}
        if kind is not None:
            error["kind"] = kind
        if details is not None:
            error["details"] = details
        body = {"lock": lock, "error": error}
        if retry_in is not None:
            body["retry_in"] = retry_in
        if retry is not None:
            body["retry"] = retry
        return self._job_call(type, id, "fail", body)

    def snooze(self, type: str, id: str, lock: str, *, delay: Optional[float] = None,
               scheduled_time: Optional[int] = None) -> None:
        """Hand a running job back, pending again after ``delay`` seconds (default 0) or at
        ``scheduled_time`` (ms), without counting the attempt or a lost run. Raises
        :class:`kvq.Halted`."""
        body = {"lock": lock}
        if delay is not None:
            body["delay"] = delay
        if scheduled_time is not None:
            body["scheduled_time"] = scheduled_time
        self._job_call(type, id, "snooze", body)

    # -- workers (membership) ----------------------------------------------------------
    def register_worker(self, worker_type: str, id: str, *, info: Any = None,
                        health_timeout: Optional[float] = None,
                        take_over: bool = False) -> JSONObject:
        """Register a worker; returns its token (keep it secret). Without a heartbeat for
        ``health_timeout`` seconds (default 10) it is declared dead and the jobs it
        accepted go back to pending at once. Raises :class:`kvq.AlreadyExists` if the id is
        alive (unless ``take_over``)."""
        body = {"id": id}
        if info is not None:
            body["info"] = info
        if health_timeout is not None:
            body["health_timeout"] = health_timeout
        if take_over:
            body["take_over"] = True
        return self._request("POST", "/v1/workers/" + _q(worker_type), body)[1]["token"]

    def heartbeat_worker(self, worker_type: str, id: str, token: str) -> None:
        """Tell the server the worker is alive. Raises :class:`kvq.Halted` once it was
        declared dead (register again), :class:`kvq.WrongToken`."""
        self._request("POST", "/v1/workers/%s/%s/heartbeat" % (_q(worker_type), _q(id)),
                      {"token": token})

    def deregister_worker(self, worker_type: str, id: str, token: str) -> None:
        """Unregister the worker; jobs it still holds go back to pending at once (each a
        lost run: hand them back with :meth:`snooze` first)."""
        self._request("DELETE", "/v1/workers/%s/%s" % (_q(worker_type), _q(id)),
                      query={"token": token})

    def list_workers(self, worker_type: str) -> JSONObject:
        """The live workers of a worker type: ``{"version", "workers": [{"id", "info",
        "registered_at", "last_heartbeat", "health_timeout"}]}``."""
        return self._request("GET", "/v1/workers/" + _q(worker_type))[1]
