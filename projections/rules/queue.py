"""The queue view: one row per job, the fold of its history, kept inline with the events.

The row holds the columns that claims, fences and listings filter and sort on, plus the whole
folded :class:`~ledger.core.state.JobState` as a msgpack blob, so a unit of work can resume the fold
from the row without reading the job's events. ``enqueue_seq`` is the notification id of the
job's ``job_enqueued`` event: the tie-breaker for "enqueue order" that a rebuild derives from
history exactly as the live write did.
"""

from __future__ import annotations

from typing import Any

import msgspec

from ledger.core.state import JobState
from ledger.core.times import opt_us, to_us
from projections.rules.view import ALL_JOB_EVENTS, Projection

COLUMNS: tuple[str, ...] = (
    "job_id",
    "job_type",
    "queue",
    "org",
    "status",
    "stage",
    "priority",
    "run_at",
    "enqueue_seq",
    "lease_expires_at",
    "run_number",
    "attempt",
    "worker_id",
    "idempotency_key",
    "source_id",
    "uri",
    "version",
    "updated_at",
    "state",
)

_encoder = msgspec.msgpack.Encoder()
_decoder = msgspec.msgpack.Decoder(JobState)


def encode_state(state: JobState) -> bytes:
    return _encoder.encode(state)


def decode_state(blob: bytes) -> JobState:
    return _decoder.decode(blob)


PROJECTION = Projection(
    "queue",
    1,
    "jl_queue",
    ("job_id",),
    COLUMNS,
    "schema_queue",
    ALL_JOB_EVENTS,
    description="one row per job: the fold of its history (what claims read)",
    blobs=(("state", decode_state),),
)


def queue_row(state: JobState, enqueue_seq: int, job_key: Any) -> dict[str, Any]:
    """The view row for ``state``; ``job_key`` is the backend's spelling of the job id."""
    subject = state.subject
    return {
        "job_id": job_key,
        "job_type": state.job_type,
        "queue": state.queue,
        "org": state.org,
        "status": state.status.value,
        "stage": state.stage,
        "priority": state.priority,
        "run_at": to_us(state.run_at),
        "enqueue_seq": enqueue_seq,
        "lease_expires_at": opt_us(state.lease_expires_at),
        "run_number": state.run_number,
        "attempt": state.attempt,
        "worker_id": state.worker_id,
        "idempotency_key": state.idempotency_key,
        "source_id": subject.source_id if subject else None,
        "uri": subject.uri if subject else None,
        "version": state.version,
        "updated_at": to_us(state.updated_at),
        "state": encode_state(state),
    }
