# SPDX-License-Identifier: Apache-2.0
"""Inline mode, for your own unit tests: :class:`InlineClient` keeps jobs in memory, with
the semantics of a kvq server, so a test runs its handlers in process without a server::

    client = kvq.testing.InlineClient()
    client.put_type("email", timeout=30, max_attempts=3)
    worker = kvq.Worker(client)

    @worker.handler("email")
    def send(job):
        return {"sent_to": job.data["to"]}

    client.add("email", "welcome-1", {"to": "ada@example.com"})
    assert worker.drain() == 1
    assert client.get("email", "welcome-1")["result"] == {"sent_to": "ada@example.com"}

A handler that raises fails its job as on a server (attempts, ``errors``, the type's
backoff, dead at ``max_attempts``); ``worker.drain(run_scheduled=True)`` also runs the
retries, moving the client's clock forward (:meth:`InlineClient.advance`).

Time is the client's own clock (the real one plus what :meth:`InlineClient.advance` added): a
job added with a ``scheduled_time`` in the future, a failed job's retry and a snoozed job are
not handed out until that clock reaches their time, so ``worker.drain()`` leaves them pending
and ``client.advance(seconds)`` (or ``drain(run_scheduled=True)``) makes them due. Flow control
holds as on a server: a paused type's jobs are not handed out (:meth:`InlineClient.pause_type`;
``for_ms`` ends by the client's clock), ``max_running`` caps the type's running jobs (a
``Worker.run`` with ``concurrency`` above it runs no more at once), ``rate`` caps accepts per
window of the client's clock, and jobs with a ``group`` take turns as on a server, each group
capped at the type's ``max_running_per_group``: by priority first; within a priority each group
with due jobs stands in line as one entry at its ``in_turn_at``, the later of its first pending
job's time (its best by priority, then time) and its last accept's, so a group just served goes
to the back; jobs without a group are not one more group: each stands at its own scheduled time,
and a group goes before it only if its ``in_turn_at`` is strictly earlier (a tie goes to the job
without a group). A group whose first job is not due yet is not in line, even if a job of it of
a worse priority is due. Schedules are not run inline.
"""

import collections
import copy
import json
import random
import secrets
import threading
import time

from . import errors
from .client import Page, _UNSET

__all__ = ["InlineClient"]

_DEFAULT_BACKOFF = {"base": 1.0, "factor": 2.0, "cap": 3600.0, "jitter": 0.2}
_MAX_GROUP_BYTES = 128


def _err(cls, status, code, message):
    return cls(message, status=status, code=code, body={"error": code, "message": message})


def _json(value, what):
    try:
        return json.loads(json.dumps(value, allow_nan=False))
    except (TypeError, ValueError) as err:
        raise TypeError("%s is not JSON: %s" % (what, err)) from None


class InlineClient:
    """An in-memory stand-in for :class:`kvq.Client`: the same methods (types, add,
    add_many, get, list, remove, cancel, rerun, result, and the workers' accept, update,
    finish, fail and snooze) with the same answers and exceptions, and no server.
    Workers' registration calls are accepted and do nothing. Thread-safe.

    Its clock is the real one plus an offset that :meth:`advance` moves, so tests can make
    scheduled jobs and retries fall due without sleeping. It also has the flow-control calls
    (:meth:`pause_type`, :meth:`resume_type`, ``put_type``'s ``max_running``, ``rate`` and
    ``max_running_per_group``) and groups (``add(..., group=)``, :meth:`groups`), which its
    :meth:`accept` obeys; it has no schedules.
    """

    url = "inline"

    def __init__(self):
        self._mu = threading.Condition(threading.RLock())
        self._types = {}
        self._jobs = {}  # (type, id) -> job dict as the server shows it, plus "_lock"
        self._offset_ms = 0
        self._accepts = collections.defaultdict(collections.deque)  # type -> accept times (rate)
        self._turns = {}  # (type, group) -> (turn sequence, time) of its last accept
        self._turn_seq = 0

    # -- the clock ---------------------------------------------------------------------
    def now_ms(self):
        """The client's clock, in milliseconds since the epoch."""
        return int(time.time() * 1000) + self._offset_ms

    def advance(self, seconds):
        """Move the client's clock forward by ``seconds``."""
        with self._mu:
            self._offset_ms += int(seconds * 1000)
            self._mu.notify_all()

    def advance_to_next(self, types=None):
        """Move the clock to the earliest time a pending job (of ``types``, default all)
        could be handed out: its scheduled time, or later while its type is paused for a
        while (``for_ms``) or its ``rate`` window is full. Returns True if it moved the clock,
        False if no such time is ahead (nothing pending, all of it due already, or its type
        paused until resumed)."""
        with self._mu:
            now = self.now_ms()
            times = []
            for (t, _), j in self._jobs.items():
                if j["state"] != "pending" or (types is not None and t not in types):
                    continue
                when = self._ready_at(t, now)
                if when is not None:
                    times.append(max(when, j["scheduled_time"]))
            later = min(times) - now if times else 0
            if later <= 0:
                return False
            self._offset_ms += later
            self._mu.notify_all()
            return True

    def _ready_at(self, type, now):
        """The earliest time the type's flow control lets an accept take a job (ignoring
        running jobs), or None while it is paused until resumed."""
        t = self._types.get(type)
        if t is None:
            return None
        when = now
        if self._paused(t, now):
            if t["paused_until"] is None:
                return None
            when = t["paused_until"]
        rate = t.get("rate")
        if rate:
            times = self._accepts[type]
            if len(times) >= rate["limit"]:
                when = max(when, times[-rate["limit"]] + rate["period_ms"])
        return when

    def _paused(self, t, now):
        if t["paused"] and t["paused_until"] is not None and now >= t["paused_until"]:
            t["paused"], t["paused_until"] = False, None
        return t["paused"]

    # -- types -------------------------------------------------------------------------
    def put_type(self, type, timeout=None, *, max_attempts=None, backoff=None,
                 finished_retention=_UNSET, max_lost_runs=_UNSET, max_running=_UNSET,
                 rate=_UNSET, max_running_per_group=_UNSET):
        """As :meth:`kvq.Client.put_type`; ``max_running``, ``rate`` and
        ``max_running_per_group`` hold for this client's accepts (see the module's notes)."""
        with self._mu:
            t = self._types.get(type)
            if t is None:
                if timeout is None:
                    raise _err(errors.NotFound, 404, "not_found", "type %r does not exist" % type)
                t = {"type": type, "timeout": None, "finished_retention": None,
                     "max_lost_runs": None, "max_attempts": 25, "backoff": dict(_DEFAULT_BACKOFF),
                     "paused": False, "paused_until": None, "max_running": None, "rate": None,
                     "max_running_per_group": None}
            t = copy.deepcopy(t)
            if timeout is not None:
                if timeout <= 0:
                    raise _err(errors.InvalidArgument, 400, "invalid_argument",
                               "timeout must be > 0")
                t["timeout"] = float(timeout)
            if max_attempts is not None:
                if not 1 <= max_attempts <= 1000000:
                    raise _err(errors.InvalidArgument, 400, "invalid_argument",
                               "max_attempts must be 1..1000000")
                t["max_attempts"] = int(max_attempts)
            for key, value in (backoff or {}).items():
                if key not in _DEFAULT_BACKOFF:
                    raise _err(errors.InvalidArgument, 400, "unknown_field",
                               "unknown field backoff.%s" % key)
                t["backoff"][key] = float(value)
            if finished_retention is not _UNSET:
                t["finished_retention"] = finished_retention
            if max_lost_runs is not _UNSET:
                t["max_lost_runs"] = max_lost_runs
            for key, value in (("max_running", max_running),
                               ("max_running_per_group", max_running_per_group)):
                if value is _UNSET:
                    continue
                if value is not None and (isinstance(value, bool) or not isinstance(value, int)
                                          or not 1 <= value <= 1000000):
                    raise _err(errors.InvalidArgument, 400, "invalid_argument",
                               "%s must be an integer 1..1000000 or null" % key)
                t[key] = value
            if rate is not _UNSET:
                if rate is not None:
                    if not isinstance(rate, dict) or set(rate) != {"limit", "period_ms"}:
                        raise _err(errors.InvalidArgument, 400, "invalid_argument",
                                   "rate needs limit and period_ms")
                    if not (isinstance(rate["limit"], int) and 1 <= rate["limit"] <= 1000):
                        raise _err(errors.InvalidArgument, 400, "invalid_argument",
                                   "rate.limit must be an integer 1..1000")
                    if not (isinstance(rate["period_ms"], int)
                            and 1 <= rate["period_ms"] <= 86400000):
                        raise _err(errors.InvalidArgument, 400, "invalid_argument",
                                   "rate.period_ms must be an integer 1..86400000")
                    rate = {"limit": rate["limit"], "period_ms": rate["period_ms"]}
                t["rate"] = rate
            self._types[type] = t
            self._mu.notify_all()
            return copy.deepcopy(t)

    def pause_type(self, type, for_ms=None):
        """As :meth:`kvq.Client.pause_type`: accepts get nothing until :meth:`resume_type`,
        or until ``for_ms`` milliseconds have passed on the client's clock."""
        with self._mu:
            t = self._type(type)
            if for_ms is not None and not (isinstance(for_ms, int)
                                           and 1 <= for_ms <= 315360000000):
                raise _err(errors.InvalidArgument, 400, "invalid_argument",
                           "for_ms must be an integer 1..315360000000")
            t["paused"] = True
            t["paused_until"] = None if for_ms is None else self.now_ms() + for_ms
            return copy.deepcopy(t)

    def resume_type(self, type):
        """As :meth:`kvq.Client.resume_type`."""
        with self._mu:
            t = self._type(type)
            t["paused"], t["paused_until"] = False, None
            self._mu.notify_all()
            return copy.deepcopy(t)

    def groups(self, type, *, limit=None, after=None):
        """As :meth:`kvq.Client.groups`: the type's groups that have pending or running jobs,
        by name (``in_turn_at``: its first pending job's time, or its last accept's if
        later, while it has pending jobs and is not full)."""
        with self._mu:
            t = self._type(type)
            now = self.now_ms()
            self._paused(t, now)
            stats = {}
            for (ty, _), j in self._jobs.items():
                g = j["group"]
                if ty != type or g is None or j["state"] == "finished":
                    continue
                s = stats.setdefault(g, {"group": g, "running": 0, "pending": 0, "first": None})
                if j["state"] == "running":
                    s["running"] += 1
                else:
                    s["pending"] += 1
                    if s["first"] is None or self._first_key(j) < self._first_key(s["first"]):
                        s["first"] = j
            out = []
            for g in sorted(stats):
                if after and g <= after:
                    continue
                s = stats[g]
                full = t["max_running_per_group"] is not None and \
                    s["running"] >= t["max_running_per_group"]
                turn = None
                if s["pending"] and not full:
                    turn = self._in_turn(type, g, s["first"])[1]
                out.append({"group": g, "running": s["running"], "pending": s["pending"],
                            "full": full, "in_turn_at": turn})
                if len(out) >= (limit or 100):
                    break
            return out

    def iter_groups(self, type, *, page_size=None):
        """As :meth:`kvq.Client.iter_groups`."""
        after, size = None, page_size or 100
        while True:
            page = self.groups(type, limit=size, after=after)
            yield from page
            if len(page) < size:
                return
            after = page[-1]["group"]

    def get_type(self, type):
        """As :meth:`kvq.Client.get_type`."""
        with self._mu:
            t = self._type(type)
            self._paused(t, self.now_ms())
            return copy.deepcopy(t)

    def list_types(self):
        """As :meth:`kvq.Client.list_types`."""
        with self._mu:
            now = self.now_ms()
            for t in self._types.values():
                self._paused(t, now)  # a pause given for_ms that has ended reads as resumed
            return [copy.deepcopy(self._types[t]) for t in sorted(self._types)]

    def _type(self, type):
        t = self._types.get(type)
        if t is None:
            raise _err(errors.NotFound, 404, "not_found", "type %r does not exist" % type)
        return t

    # -- jobs --------------------------------------------------------------------------
    def _job(self, type, id):
        j = self._jobs.get((type, id))
        if j is None:
            raise _err(errors.NotFound, 404, "not_found", "job %s/%s does not exist" % (type, id))
        return j

    @staticmethod
    def _view(job):
        return {k: copy.deepcopy(v) for k, v in job.items() if not k.startswith("_")}

    def _changed(self, job):
        job["updated_at"] = self.now_ms()
        self._mu.notify_all()

    def add(self, type, id, data=None, *, priority=None, scheduled_time=None, if_exists=None,
            group=None):
        """As :meth:`kvq.Client.add`."""
        with self._mu:
            return self._add(type, {"id": id, "data": data, "priority": priority,
                                    "scheduled_time": scheduled_time, "group": group}, if_exists)

    def _add(self, type, entry, if_exists):
        if self._types.get(type) is None or self._types[type]["timeout"] is None:
            raise _err(errors.NoTimeout, 409, "no_timeout", "type %r has no timeout" % type)
        if if_exists not in (None, "update", "keep"):
            raise _err(errors.InvalidArgument, 400, "invalid_argument",
                       "if_exists must be \"update\" or \"keep\"")
        jid = entry["id"]
        data = _json({} if entry.get("data") is None else entry["data"], "the job's data")
        group = entry.get("group")
        if group is not None and (not isinstance(group, str) or
                                  not 1 <= len(group.encode()) <= _MAX_GROUP_BYTES or
                                  any(ord(c) < 32 or ord(c) == 127 for c in group)):
            raise _err(errors.InvalidArgument, 400, "invalid_argument",
                       "group must be 1..128 bytes without control characters")
        now = self.now_ms()
        job = self._jobs.get((type, jid))
        if job is not None and if_exists == "keep":
            return False
        priority = entry.get("priority")
        when = entry.get("scheduled_time")
        if job is None or job["state"] != "running":
            self._forget_turn(type, group)
        if job is not None and job["state"] == "running":
            job["resubmitted"] = True
            job["_next"] = {"data": data, "priority": priority, "scheduled_time": when}
            self._changed(job)
            return True
        if job is not None and job["state"] == "pending":
            job["data"] = data
            job["group"] = group
            if priority is not None:
                job["priority"] = priority
            if when is not None:
                job["scheduled_time"] = when
            self._changed(job)
            return True
        self._jobs[(type, jid)] = {
            "type": type, "id": jid, "state": "pending", "outcome": None, "data": data,
            "result": None, "progress": None, "scheduled_time": now if when is None else when,
            "priority": priority or 0, "resubmitted": False, "worker": "", "worker_type": "",
            "attempts": 0, "lost_runs": 0, "errors": [], "gave_up": False,
            "created_at": now if job is None else job["created_at"], "updated_at": now,
            "started_at": None, "ended_at": None, "group": group, "_lock": None}
        self._mu.notify_all()
        return True

    def add_many(self, type, jobs, *, if_exists=None):
        """As :meth:`kvq.Client.add_many` (all or none)."""
        with self._mu:
            entries = [dict(j) if isinstance(j, dict) else {"id": j[0], "data": j[1]}
                       for j in jobs]
            if not 1 <= len(entries) <= 1000:
                raise _err(errors.InvalidArgument, 400, "invalid_argument",
                           "jobs must have 1..1000 entries")
            saved = copy.deepcopy(self._jobs)
            added, kept = 0, []
            try:
                for e in entries:
                    if self._add(type, e, e.get("if_exists", if_exists)):
                        added += 1
                    else:
                        kept.append(e["id"])
            except Exception:
                self._jobs = saved
                raise
            return {"added": added, "kept": kept}

    def get(self, type, id):
        """As :meth:`kvq.Client.get`."""
        with self._mu:
            return self._view(self._job(type, id))

    def counts(self, type):
        """As :meth:`kvq.Client.counts`: how many of the type's jobs are in each state, by
        this client's clock."""
        with self._mu:
            self._type(type)
            now = self.now_ms()
            out = dict.fromkeys(("pending", "scheduled", "running", "finished", "dead",
                                 "cancelled"), 0)
            for (t, _), j in self._jobs.items():
                if t != type:
                    continue
                out[j["state"]] += 1
                if j["state"] == "pending" and j["scheduled_time"] > now:
                    out["scheduled"] += 1
                if j["outcome"] in ("dead", "cancelled"):
                    out[j["outcome"]] += 1
            return out

    def list(self, type, state=None, *, worker=None, worker_type=None, limit=None, cursor=None):
        """As :meth:`kvq.Client.list` (the cursor is the last id of the previous page)."""
        with self._mu:
            self._type(type)
            now = self.now_ms()

            def keep(j):
                if worker is not None and j["worker"] != worker:
                    return False
                if worker_type is not None and j["worker_type"] != worker_type:
                    return False
                if state in (None, j["state"], j["outcome"]):
                    return True
                if state == "scheduled":
                    return j["state"] == "pending" and j["scheduled_time"] > now
                if state == "due":
                    return j["state"] == "pending" and j["scheduled_time"] <= now
                if state not in ("pending", "running", "finished", "succeeded", "dead",
                                 "cancelled"):
                    raise _err(errors.InvalidArgument, 400, "invalid_argument",
                               "unknown state %r" % state)
                return False

            ids = sorted(i for (t, i) in self._jobs if t == type and (not cursor or i > cursor))
            matched = [self._jobs[(type, i)] for i in ids if keep(self._jobs[(type, i)])]
            limit = limit or 100
            page = matched[:limit]
            more = len(matched) > limit
            return Page([self._view(j) for j in page], page[-1]["id"] if more else "")

    def iter_jobs(self, type, state=None, *, page_size=None, **filters):
        """As :meth:`kvq.Client.iter_jobs`."""
        cursor = None
        while True:
            page = self.list(type, state, limit=page_size, cursor=cursor, **filters)
            yield from page.jobs
            if not page.next_cursor:
                return
            cursor = page.next_cursor

    def remove(self, type, id):
        """As :meth:`kvq.Client.remove`."""
        with self._mu:
            self._job(type, id)
            del self._jobs[(type, id)]
            self._mu.notify_all()

    def remove_all(self, type):
        """As :meth:`kvq.Client.remove_all`."""
        with self._mu:
            keys = [k for k in self._jobs if k[0] == type]
            for k in keys:
                del self._jobs[k]
            self._mu.notify_all()
            return len(keys)

    def _end(self, job, outcome, result=None):
        job.update(state="finished", outcome=outcome, result=result, ended_at=self.now_ms(),
                   _lock=None)
        self._changed(job)

    def cancel(self, type, id):
        """As :meth:`kvq.Client.cancel`."""
        with self._mu:
            job = self._job(type, id)
            if job["state"] == "finished":
                raise _err(errors.WrongState, 409, "wrong_state", "job %s/%s is finished"
                           % (type, id))
            self._end(job, "cancelled")
            return self._view(job)

    def rerun(self, type, id, *, scheduled_time=None, priority=None):
        """As :meth:`kvq.Client.rerun`."""
        with self._mu:
            job = self._job(type, id)
            if job["state"] != "finished":
                raise _err(errors.WrongState, 409, "wrong_state", "job %s/%s is not finished"
                           % (type, id))
            self._forget_turn(type, job["group"])
            job.update(state="pending", outcome=None, result=None, progress=None, attempts=0,
                       ended_at=None, gave_up=False, lost_runs=0,
                       scheduled_time=self.now_ms() if scheduled_time is None else scheduled_time)
            if priority is not None:
                job["priority"] = priority
            self._changed(job)
            return self._view(job)

    def result(self, type, id, timeout=None):
        """As :meth:`kvq.Client.result`: waits (another thread must run the job, e.g. a
        ``Worker.run`` in a thread) unless the job already ended."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._mu:
            while True:
                job = self._jobs.get((type, id))
                if job is None:
                    raise _err(errors.NotFound, 404, "not_found",
                               "job %s/%s does not exist" % (type, id))
                if job["state"] == "finished":
                    if job["outcome"] == "succeeded":
                        return copy.deepcopy(job["result"])
                    cls = errors.JobCancelled if job["outcome"] == "cancelled" else errors.JobDead
                    raise cls(self._view(job))
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    raise TimeoutError("job %s/%s did not end in time" % (type, id))
                self._mu.wait(left)

    # -- workers' job calls ------------------------------------------------------------
    @staticmethod
    def _first_key(j):
        return (j["priority"], j["scheduled_time"], j["id"])

    def _forget_turn(self, type, group):
        """Forgets the group's last accept if it has no pending or running job (the server
        deletes such a group's row): a job added to it later stands at its own time."""
        if group is None or (type, group) not in self._turns:
            return
        if not any(ty == type and j["group"] == group and j["state"] != "finished"
                   for (ty, _), j in self._jobs.items()):
            del self._turns[(type, group)]

    def _in_turn(self, type, group, first):
        """Where a group whose first pending job is ``first`` stands in line, as a sort key:
        (priority, in_turn_at, then, among groups in turn at the same millisecond, those whose
        turn is their first job's time by name before those whose turn is a last accept, in
        accept order — the server's microseconds)."""
        last = self._turns.get((type, group))
        if last is not None and last[1] >= first["scheduled_time"]:
            return (first["priority"], last[1], 1, last[0], "")
        return (first["priority"], first["scheduled_time"], 0, 0, group)

    def _take(self, type, count, now, max_priority, max_scheduled_time):
        """The due jobs an accept takes now, in order, under the type's flow control: none
        while paused; at most max_running running and rate accepts per window; as the server
        takes them: by priority, then each group standing in line once at its in_turn_at (its
        first pending job's time, or its last accept's if later) against each job without a
        group at its own time (a tie goes to the job), each group at most
        max_running_per_group running."""
        t = self._type(type)
        if self._paused(t, now):
            return []
        running = collections.Counter()
        total = 0
        for (ty, _), j in self._jobs.items():
            if ty == type and j["state"] == "running":
                total += 1
                running[j["group"]] += 1
        if t["max_running"] is not None:
            count = min(count, t["max_running"] - total)
        rate = t["rate"]
        if rate:
            times = self._accepts[type]
            while times and times[0] <= now - rate["period_ms"]:
                times.popleft()
            count = min(count, rate["limit"] - len(times))
        per_group = t["max_running_per_group"]
        max_time = now if max_scheduled_time is None else max_scheduled_time
        pending = [j for (ty, _), j in self._jobs.items()
                   if ty == type and j["state"] == "pending"]
        taken = []
        while len(taken) < count:
            ungrouped, firsts = None, {}
            for j in pending:
                if any(j is x for x in taken):
                    continue
                g = j["group"]
                if g is None:
                    if j["scheduled_time"] <= max_time and \
                            (max_priority is None or j["priority"] <= max_priority) and \
                            (ungrouped is None or self._first_key(j) < self._first_key(ungrouped)):
                        ungrouped = j
                elif g not in firsts or self._first_key(j) < self._first_key(firsts[g]):
                    firsts[g] = j
            turn = None  # (sort key, group, job) of the first group in line
            for g, first in firsts.items():
                if per_group is not None and running[g] >= per_group:
                    continue  # full: out of line until one of its runs ends
                key = self._in_turn(type, g, first)
                if key[1] > max_time or (max_priority is not None and key[0] > max_priority):
                    continue  # its first job (or its turn) is not due
                if turn is None or key < turn[0]:
                    turn = (key, g, first)
            if turn is not None and (ungrouped is None or
                                     (turn[0][0], turn[0][1]) <
                                     (ungrouped["priority"], ungrouped["scheduled_time"])):
                _, g, job = turn
                self._turn_seq += 1
                self._turns[(type, g)] = (self._turn_seq, now)
                running[g] += 1
            elif ungrouped is not None:
                job = ungrouped
            else:
                break
            taken.append(job)
        if rate:
            self._accepts[type].extend([now] * len(taken))
        return taken

    def accept(self, type, count=1, timeout=0, *, worker=None, worker_type=None,
               max_priority=None, max_scheduled_time=None):
        """As :meth:`kvq.Client.accept`: due jobs by priority, then scheduled time, under
        the type's flow control (pause, ``max_running``, ``rate``, groups in turn)."""
        deadline = time.monotonic() + timeout
        with self._mu:
            self._type(type)
            while True:
                now = self.now_ms()
                due = self._take(type, count, now, max_priority, max_scheduled_time)
                if due:
                    taken = []
                    for job in due:
                        job.update(state="running", _lock=secrets.token_hex(16),
                                   worker=worker or "", worker_type=worker_type or "",
                                   started_at=now, progress=None,
                                   attempts=job["attempts"] + 1)
                        self._changed(job)
                        taken.append({"type": type, "id": job["id"], "lock": job["_lock"],
                                      "data": copy.deepcopy(job["data"])})
                    return taken
                left = deadline - time.monotonic()
                if left <= 0:
                    return []
                self._mu.wait(min(left, 0.1))

    def _check_types(self, types):
        types = list(types)
        if not 1 <= len(types) <= 64 or len(set(types)) != len(types) or \
                not all(isinstance(t, str) for t in types):
            raise _err(errors.InvalidArgument, 400, "invalid_argument",
                       "field 'types' must be a list of 1 to 64 distinct type names")
        for t in types:
            self._type(t)
        return types

    def _best_type(self, types, max_priority, max_scheduled_time):
        """The type an accept over ``types`` takes from now: that of the best due job (by
        priority, then scheduled time, then the first type given), or None. Each type's
        candidate is what its own accept would take, flow control and groups included; the
        looks are undone, so nothing is counted but the accept that follows."""
        now = self.now_ms()
        saved = (copy.deepcopy(self._accepts), dict(self._turns), self._turn_seq)
        best = None
        try:
            for i, t in enumerate(types):
                due = self._take(t, 1, now, max_priority, max_scheduled_time)
                if due:
                    key = (due[0]["priority"], due[0]["scheduled_time"], i)
                    if best is None or key < best[0]:
                        best = (key, t)
        finally:
            self._accepts, self._turns, self._turn_seq = saved
        return best[1] if best else None

    def accept_any(self, types, timeout=0, *, worker=None, worker_type=None, max_priority=None,
                   max_scheduled_time=None):
        """As :meth:`kvq.Client.accept_any`: one due job of any of ``types``, the best
        priority, then the earliest scheduled time, then the first type given."""
        deadline = time.monotonic() + timeout
        with self._mu:
            types = self._check_types(types)
            while True:
                t = self._best_type(types, max_priority, max_scheduled_time)
                if t is not None:
                    return self.accept(t, 1, 0, worker=worker, worker_type=worker_type,
                                       max_priority=max_priority,
                                       max_scheduled_time=max_scheduled_time)
                left = deadline - time.monotonic()
                if left <= 0:
                    return []
                self._mu.wait(min(left, 0.1))

    def _held(self, type, id, lock):
        job = self._jobs.get((type, id))
        if job is None or job["state"] != "running" or job["_lock"] != lock:
            raise _err(errors.Halted, 409, "halted", "job %s/%s is no longer this lock's"
                       % (type, id))
        return job

    def _resubmitted(self, job):
        nxt = job.pop("_next", None) or {}
        job.update(state="pending", resubmitted=False, _lock=None, attempts=0,
                   data=nxt.get("data", job["data"]),
                   scheduled_time=nxt.get("scheduled_time") or self.now_ms())
        if nxt.get("priority") is not None:
            job["priority"] = nxt["priority"]
        self._changed(job)

    def update(self, type, id, lock, *, progress=_UNSET, data=None):
        """As :meth:`kvq.Client.update`."""
        with self._mu:
            job = self._held(type, id, lock)
            if progress is not _UNSET:
                job["progress"] = _json(progress, "progress")
            if data is not None:
                job["data"] = _json(data, "data")
            self._changed(job)
            return job["resubmitted"]

    def finish(self, type, id, lock, result=None, *, data=None, next=None):
        """As :meth:`kvq.Client.finish`, ``next`` included: the finish and the accept of the
        next job happen under one lock, as they commit in one transaction on a server."""
        accept = dict(next or {})
        types = accept.pop("types", None) or [type]
        wait = accept.pop("timeout", 0) or 0
        with self._mu:
            result = _json(result, "the result")
            if next is not None:
                types = self._check_types(types)
            job = self._held(type, id, lock)
            if data is not None:
                job["data"] = _json(data, "data")
            job["lost_runs"] = 0
            if job["resubmitted"]:
                self._resubmitted(job)
            else:
                self._end(job, "succeeded", result)
            if next is None:
                return None
            taken = self.accept_any(types, 0, **accept)
        if not taken and wait > 0:
            taken = self.accept_any(types, wait, **accept)
        return taken[0] if taken else None

    def fail(self, type, id, lock, message, *, kind=None, details=None, retry_in=None,
             retry=None):
        """As :meth:`kvq.Client.fail`: records the error, then the job is pending again
        after ``retry_in`` or the type's backoff, or ends dead."""
        with self._mu:
            if not message:
                raise _err(errors.InvalidArgument, 400, "invalid_argument",
                           "error.message must not be empty")
            job = self._held(type, id, lock)
            t = self._type(type)
            now = self.now_ms()
            attempt = job["attempts"]
            job["errors"] = (job["errors"] + [{
                "attempt": attempt, "at": now, "worker": job["worker"],
                "kind": kind or "error", "message": message[:4096],
                "details": _json(details, "details")}])[-10:]
            if job["resubmitted"]:
                self._resubmitted(job)
                return {"dead": False, "retry_at": job["scheduled_time"], "attempt": attempt}
            if retry is False or attempt >= t["max_attempts"]:
                self._end(job, "dead")
                return {"dead": True, "retry_at": None, "attempt": attempt}
            if retry_in is None:
                b = t["backoff"]
                d = min(b["cap"], b["base"] * b["factor"] ** (attempt - 1))
                retry_in = random.uniform(d * (1 - b["jitter"]), d)
            job.update(state="pending", _lock=None,
                       scheduled_time=now + int(retry_in * 1000))
            self._changed(job)
            return {"dead": False, "retry_at": job["scheduled_time"], "attempt": attempt}

    def snooze(self, type, id, lock, *, delay=None, scheduled_time=None):
        """As :meth:`kvq.Client.snooze`: pending again, the attempt not counted."""
        with self._mu:
            job = self._held(type, id, lock)
            when = scheduled_time if scheduled_time is not None else \
                self.now_ms() + int((delay or 0) * 1000)
            job.update(state="pending", _lock=None, scheduled_time=when,
                       attempts=job["attempts"] - 1)
            self._changed(job)

    # -- workers (membership): accepted, and nothing to do in process -------------------
    def register_worker(self, worker_type, id, *, info=None, health_timeout=None,
                        take_over=False):
        """Accepted; returns a token. Nothing watches an inline worker's health."""
        return secrets.token_hex(16)

    def heartbeat_worker(self, worker_type, id, token):
        """Accepted; does nothing."""

    def deregister_worker(self, worker_type, id, token):
        """Accepted; does nothing."""
