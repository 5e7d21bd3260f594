# SPDX-License-Identifier: Apache-2.0
"""OpenTelemetry, when the application has it: never a dependency of kvq.

If ``opentelemetry`` (the API package) can be imported, an add carries the current span's
context as the ``traceparent`` header, and the worker runs each handler in a consumer span
whose parent is the job's ``traceparent``. Without it (or with the API but no SDK, whose
tracer records nothing) both do nothing. The import is tried once, on first use, so
``import kvq`` costs nothing either way.
"""

import contextlib
from typing import Any, Dict, Iterator, Optional

_UNTRIED = object()
_api: Any = _UNTRIED  # (propagate, trace) once imported, None if it cannot be


def _load() -> Optional[Any]:
    global _api
    if _api is _UNTRIED:
        try:
            from opentelemetry import propagate, trace
            _api = (propagate, trace)
        except ImportError:
            _api = None
    return _api


def _forget() -> None:
    """Try the import again on next use (for tests that install or remove the API)."""
    global _api
    _api = _UNTRIED


def trace_headers() -> Dict[str, str]:
    """The current context as W3C headers (``traceparent``, ``tracestate``), or {}."""
    api = _load()
    if api is None:
        return {}
    carrier: Dict[str, str] = {}
    api[0].inject(carrier)
    return {k: v for k, v in carrier.items() if k in ("traceparent", "tracestate")}


class _Outcome:
    """What the worker tells the span about the run's end."""

    def __init__(self, span: Any, trace: Any) -> None:
        self._span = span
        self._trace = trace

    def set(self, outcome: str, exc: Optional[BaseException] = None) -> None:
        if self._span is None:
            return
        self._span.set_attribute("kvq.outcome", outcome)
        if exc is not None:
            self._span.record_exception(exc)
            self._span.set_status(self._trace.Status(self._trace.StatusCode.ERROR, str(exc)))


@contextlib.contextmanager
def consumer_span(job_type: str, job_id: str, traceparent: Optional[str]) -> Iterator[_Outcome]:
    """The handler's span, current while it runs: a consumer span named ``TYPE process``, a
    child of ``traceparent`` (the job's, from its producer), with the messaging attributes.
    Without the API it is a no-op."""
    api = _load()
    if api is None:
        yield _Outcome(None, None)
        return
    propagate, trace = api
    parent = propagate.extract({"traceparent": traceparent}) if traceparent else None
    tracer = trace.get_tracer("kvq")
    with tracer.start_as_current_span(
            "%s process" % job_type, context=parent, kind=trace.SpanKind.CONSUMER,
            attributes={"messaging.system": "kvq", "messaging.operation": "process",
                        "messaging.destination.name": job_type,
                        "messaging.message.id": job_id}) as span:
        yield _Outcome(span, trace)
