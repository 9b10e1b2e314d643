"""OpenTelemetry spans around handler runs: one ``process <job type>`` span per run.

Only ``opentelemetry-api`` is a dependency: until an application installs an SDK (a
``TracerProvider`` with an exporter), the tracer is the API's no-op and a span costs a few
attribute writes. The span's attributes say what ran and how it ended, never what it carried
(no payload, output or error message: those may hold personal data, and the ledger's
history already keeps them): the job's type, id, run and attempt, and the outcome
(``succeeded`` or the failure's kind) with the failure's stable code. A failed run's span has
status ``ERROR``. Names follow OpenTelemetry's messaging conventions where they fit
(``messaging.system``, ``messaging.operation.type``, ``messaging.destination.name``, span
kind ``CONSUMER``); the rest are ``jobledger.job.*``.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from opentelemetry import trace
from opentelemetry.trace import Span, SpanKind, Status, StatusCode
from opentelemetry.util.types import AttributeValue

from ledger.core.state import JobState
from ledger.core.values import Failure

TRACER_NAME = "jobledger"
SUCCEEDED = "succeeded"


@contextmanager
def run_span(job: JobState) -> Iterator[Span]:
    """The span of one run of ``job``'s handler (the current span inside the block, so a
    handler's own spans are its children); an exception escaping the block is recorded.

    Until an application installs a tracer provider, the API's spans record nothing, and
    this yields the invalid span without building one or touching the context: ~9 µs of
    the worker's CPU per job less (bench/README.md, "Handler starts without a read"). The
    provider is looked up at each run, so one installed later is used from then on."""
    if isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider):
        yield trace.INVALID_SPAN
        return
    tracer = trace.get_tracer(TRACER_NAME)
    attributes: dict[str, AttributeValue] = {
        "messaging.system": "jobledger",
        "messaging.operation.type": "process",
        "messaging.destination.name": job.job_type,
        "jobledger.job.type": job.job_type,
        "jobledger.job.id": str(job.job_id),
        "jobledger.job.run_number": job.run_number,
        "jobledger.job.attempt": job.attempt,
    }
    with tracer.start_as_current_span(
        f"process {job.job_type}", kind=SpanKind.CONSUMER, attributes=attributes
    ) as span:
        yield span


def record_outcome(span: Span, failure: Failure | None) -> None:
    """Say on ``span`` how the run ended (``failure`` ``None``: it succeeded)."""
    if failure is None:
        span.set_attribute("jobledger.job.outcome", SUCCEEDED)
        return
    span.set_attribute("jobledger.job.outcome", failure.kind.value)
    span.set_attribute("jobledger.job.failure_code", failure.code)
    span.set_status(Status(StatusCode.ERROR, failure.code))
