# SPDX-License-Identifier: Apache-2.0
"""kvq: the Python client of kvq, a durable background-job system.

- :class:`Client` — every call of kvq's HTTP API: types (with flow control: pause_type,
  resume_type, max_running, rate, max_running_per_group), add / add_many (with a group),
  groups, schedules (put_schedule, get_schedule, schedules, remove_schedule), get, list,
  wait, events, result, remove, cancel, rerun, workflows (add with ``depends_on`` and
  ``batch``, dependencies, put_batch / seal_batch / get_batch, fan_out), and the workers' calls (accept, accept_any over
  several types, finish with ``next``: finish a job and take the next in one request).
- :class:`Worker` — a runner: handlers per job type, concurrency, heartbeats, fencing,
  retries with backoff and a graceful shutdown on SIGTERM.
- :mod:`kvq.testing` — :class:`~kvq.testing.InlineClient`, a client of a ``kvq serve
  --ephemeral`` it starts, to run your handlers in unit tests against the real server.
- Errors: :class:`KvqError` and its subclasses, each with ``status``, ``code``, ``message``.

Standard library only; Python 3.9 or later.
"""

import logging

from .client import (DEFAULT_URL, Batch, BatchCallback, BatchCounts, Client, Dependency, JobRef,
                     Page, job_body)
from .errors import (AlreadyExists, Conflict, Halted, InvalidArgument, JobCancelled, JobDead,
                     JobFailed, KvqError, NetworkError, NoTimeout, NotFound, ServerError,
                     TypeHasJobs, Unauthorized, Unavailable, WrongState, WrongToken)
from .worker import Job, JobError, NoRetry, RetryIn, Snooze, Worker
from . import testing

__version__ = "0.2.0"

# The runner logs to "kvq.worker"; configure logging (logging.basicConfig) to see it.
logging.getLogger("kvq").addHandler(logging.NullHandler())

__all__ = ["Client", "Page", "DEFAULT_URL", "job_body", "JobRef", "Dependency", "Batch",
           "BatchCallback", "BatchCounts", "Worker", "Job", "JobError", "NoRetry",
           "RetryIn", "Snooze", "testing", "KvqError",
           "InvalidArgument", "Unauthorized", "WrongToken", "NotFound", "Conflict", "Halted",
           "WrongState", "NoTimeout", "AlreadyExists", "TypeHasJobs", "Unavailable",
           "ServerError", "NetworkError", "JobFailed", "JobDead", "JobCancelled"]
