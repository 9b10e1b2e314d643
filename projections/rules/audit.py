"""The audit projection's rules: one row per job event, keyed by its notification position.

Pure: the runner (:mod:`projections.runners.tracked`) and the replay both call :func:`audit_row`.
The
job type and org are the job's own (from its ``job_enqueued`` event), never guessed: the
caller passes the job's enqueue request, known from its fold, its cache or ``jl_queue``.

``code`` is the failure code of the events that carry a :class:`~ledger.core.events.Failure`
(``job_failed``, ``job_dead_lettered``), the error code of a ``job_reap_deferred`` (what made
the reap fail, e.g. ``store.busy``), and ``NULL`` on every other row. ``job_retry_scheduled``
carries none: the retry's code is that of the ``job_failed`` just before it in the same job
(recorded in the same commit), which is how audit queries match retries by code
(:mod:`ledger.store.audit_reads`), so the rule needs no state beyond the event.
"""

from __future__ import annotations

from typing import Any
from uuid import UUID

from ledger.core.events import Failure, JobEvent, JobReapDeferred
from ledger.core.times import to_us
from projections.rules.view import ALL_JOB_EVENTS, Projection

COLUMNS = (
    "position",
    "job_id",
    "job_type",
    "org",
    "event",
    "worker_id",
    "run_number",
    "attempt",
    "at",
    "code",
)

PROJECTION = Projection(
    "audit",
    2,
    "jl_audit",
    ("position",),
    COLUMNS,
    "schema_audit",
    ALL_JOB_EVENTS,
    mode="tracked",
    description="one row per job event, indexed for audit queries (tracked)",
)


def audit_row(
    position: int, job_id: UUID, event: JobEvent, job_type: str, org: str | None
) -> dict[str, Any]:
    """The audit row of one job event (``None`` where the event has no worker/run/attempt, or
    no failure code)."""
    return {
        "position": position,
        "job_id": job_id,
        "job_type": job_type,
        "org": org,
        "event": event.name,
        "worker_id": getattr(event, "worker_id", None),
        "run_number": getattr(event, "run_number", None),
        "attempt": getattr(event, "attempt", None),
        "at": to_us(event.at),
        "code": _code(event),
    }


def _code(event: JobEvent) -> str | None:
    """The code an audit query matches on: a failure's, or a deferred reap's error's."""
    if isinstance(event, JobReapDeferred):
        return event.cause.code
    failure = getattr(event, "failure", None)
    return failure.code if isinstance(failure, Failure) else None
