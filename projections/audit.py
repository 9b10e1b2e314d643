"""The audit projection's rules: one row per job event, keyed by its notification position.

Pure: the runner (:mod:`projections.tracked`) and the replay both call :func:`audit_row`. The
job type and org are the job's own (from its ``job_enqueued`` event), never guessed: the
caller passes the job's enqueue request, known from its fold, its cache or ``jl_queue``.
"""

from __future__ import annotations

from typing import Any
from uuid import UUID

from ledger.events import JobEvent
from ledger.times import to_us

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
)


def audit_row(
    position: int, job_id: UUID, event: JobEvent, job_type: str, org: str | None
) -> dict[str, Any]:
    """The audit row of one job event (``None`` where the event has no worker/run/attempt)."""
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
    }
