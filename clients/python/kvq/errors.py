# SPDX-License-Identifier: Apache-2.0
"""The exceptions of the kvq client: one hierarchy, rooted at :class:`KvqError`.

Every error the server answers carries its HTTP ``status``, the API's error ``code`` (the
``error`` field of the body, e.g. ``"not_found"``) and its ``message``. The classes below
name the codes a program usually handles; any other code is a plain :class:`KvqError`.
"""


class KvqError(Exception):
    """An error from a kvq server, or on the way to it.

    Attributes:
        status: the HTTP status (``int``), or ``None`` when no answer arrived.
        code: the API's error name (``"not_found"``, ``"halted"``, ...), or ``None``.
        message: the server's explanation (or ours, when there was no answer).
        body: the parsed JSON body of the answer, if any.
    """

    def __init__(self, message, status=None, code=None, body=None):
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.body = body

    @property
    def retryable(self):
        """True for errors worth retrying later with a backoff: 503 and network errors."""
        return False

    def __str__(self):
        if self.status is None:
            return self.message
        return "%s %s: %s" % (self.status, self.code or "error", self.message)


class InvalidArgument(KvqError):
    """400: a field is missing, of the wrong type or out of range (``invalid_argument``,
    ``unknown_field``, ``malformed_json``, ``bad_request``)."""


class Unauthorized(KvqError):
    """401 ``unauthorized``: the server has a token and this client sent none or another."""


class WrongToken(KvqError):
    """403 ``wrong_token``: a worker heartbeat or unregister with a token not the worker's."""


class NotFound(KvqError):
    """404 ``not_found``: the job or type does not exist."""


class Conflict(KvqError):
    """409: the call does not apply to the job or worker as it is now (the subclasses name
    why)."""


class Halted(Conflict):
    """409 ``halted``: the caller no longer holds the job (removed, cancelled, re-enqueued,
    accepted by another) or the worker registration (declared dead). Stop working on it."""


class WrongState(Conflict):
    """409 ``wrong_state``: e.g. cancel of a finished job, rerun of one not finished."""


class NoTimeout(Conflict):
    """409 ``no_timeout``: adding a job to a type that has no timeout (create it with
    :meth:`kvq.Client.put_type`)."""


class AlreadyExists(Conflict):
    """409 ``already_exists``: a worker id registered and alive elsewhere."""


class TypeHasJobs(Conflict):
    """409 ``type_has_jobs``: deleting a type that still has jobs."""


class Unavailable(KvqError):
    """503 (``unavailable``, ``resource_exhausted``): the store is busy, unreachable or full.
    Retry later with a backoff."""

    @property
    def retryable(self):
        return True


class ServerError(KvqError):
    """500 ``internal`` or another 5xx: a bug or a corrupt store."""


class NetworkError(KvqError):
    """No answer: the server could not be reached, the connection broke, or the request
    timed out. ``status`` is ``None``. Retry later with a backoff."""

    @property
    def retryable(self):
        return True


class JobFailed(KvqError):
    """A job ended without succeeding, raised by :meth:`kvq.Client.result`.

    Attributes:
        job: the job as the server shows it (a dict).
        outcome: ``"dead"`` or ``"cancelled"``.
        last_error: the job's last recorded error (a dict with ``message``, ``kind``,
            ``details``...), or ``None``.
    """

    def __init__(self, job):
        self.job = job
        self.outcome = job.get("outcome")
        errors = job.get("errors") or []
        self.last_error = errors[-1] if errors else None
        what = "job %s/%s ended %s" % (job.get("type"), job.get("id"), self.outcome)
        if self.last_error:
            what += ": %s: %s" % (self.last_error.get("kind"), self.last_error.get("message"))
        super().__init__(what, code=self.outcome, body=job)


class JobDead(JobFailed):
    """The job ended dead: its attempts were used up, or a worker failed it with
    ``retry=False``, or its runs were lost ``max_lost_runs`` times. ``last_error`` says why."""


class JobCancelled(JobFailed):
    """The job was cancelled."""


_BY_CODE = {
    "invalid_argument": InvalidArgument,
    "unknown_field": InvalidArgument,
    "malformed_json": InvalidArgument,
    "bad_request": InvalidArgument,
    "unauthorized": Unauthorized,
    "wrong_token": WrongToken,
    "not_found": NotFound,
    "halted": Halted,
    "wrong_state": WrongState,
    "no_timeout": NoTimeout,
    "already_exists": AlreadyExists,
    "type_has_jobs": TypeHasJobs,
    "unavailable": Unavailable,
    "resource_exhausted": Unavailable,
    "internal": ServerError,
}


def error_for(status, body):
    """The exception for an error answer: by the body's ``error`` code, else by status."""
    code = body.get("error") if isinstance(body, dict) else None
    message = body.get("message") if isinstance(body, dict) else None
    if not message:
        message = "HTTP %d" % status
    cls = _BY_CODE.get(code)
    if cls is None:
        if status == 503:
            cls = Unavailable
        elif status >= 500:
            cls = ServerError
        elif status == 404:
            cls = NotFound
        elif status == 400:
            cls = InvalidArgument
        elif status == 409:
            cls = Conflict
        else:
            cls = KvqError
    return cls(message, status=status, code=code, body=body)
