"""The queue view: one row per job, the fold of its history, kept inline with the events.

The row holds the columns that claims, fences and listings filter and sort on, plus the whole
folded :class:`~ledger.core.state.JobState` as a msgpack blob, so a unit of work can resume the fold
from the row without reading the job's events. The blob is *packed* (:func:`encode_state`): a
msgpack array in field order, the request an array too, the job id 16 bytes — 190 bytes for a
small job where the map form, every field name spelled out, took 630; every status change
rewrites the row, so that is paid once per event in the table and once in the WAL. Blobs of
the map form (schema version 1 of this view, and old dead letters' snapshots) still decode.

``enqueue_seq`` is the notification id of the job's ``job_enqueued`` event: the tie-breaker
for "enqueue order" that a rebuild derives from history exactly as the live write did.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast
from uuid import UUID

import msgspec
from msgspec.structs import astuple

from ledger.core.events import JOB_EVENTS, Event
from ledger.core.state import JobState, evolve
from ledger.core.times import opt_us, to_us
from ledger.core.values import EnqueueRequest
from ledger.views.kind import StateKind
from ledger.views.view import ALL_JOB_EVENTS, Projection

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


def _packed(cls: type[msgspec.Struct], **types: Any) -> type[msgspec.Struct]:
    """An array-like twin of ``cls``: the same fields in the same order (``types`` overriding
    some fields' types), so no field name is stored. (A subclass would not do: msgspec moves
    a redeclared field, and the order is the format.)"""
    return msgspec.defstruct(
        f"Packed{cls.__name__}",
        [
            (f.name, types.get(f.name, f.type))
            if f.required
            else (f.name, types.get(f.name, f.type), f.default)
            for f in msgspec.structs.fields(cls)
        ],
        array_like=True,
        frozen=True,
    )


PackedRequest = _packed(EnqueueRequest)
"""The blob's spelling of :class:`~ledger.core.events.EnqueueRequest` (events keep the map
form; this is the view's private encoding)."""
PackedJobState = _packed(JobState, request=PackedRequest)
"""The blob's spelling of :class:`~ledger.core.state.JobState`. Decoding a blob needs its
fields in the order they were written, so a change to ``JobState``'s fields other than a new
last one with a default must bump this view's version (``jobledger migrate`` then rebuilds the
rows from the history)."""

_REQUEST_AT = JobState.__struct_fields__.index("request")
_encoder = msgspec.msgpack.Encoder(uuid_format="bytes")
_decoder = msgspec.msgpack.Decoder(PackedJobState)
_map_decoder = msgspec.msgpack.Decoder(JobState)
# A version-1 blob is a msgpack map (fixmap 0x80-0x8f, map 16 0xde, map 32 0xdf), a packed
# one an array; msgspec decodes no union of two untagged structs, so the first byte chooses.
_MAP_PREFIXES = frozenset((*range(0x80, 0x90), 0xDE, 0xDF))


def encode_state(state: JobState) -> bytes:
    """The packed blob of ``state``: its fields as an array (the request's too)."""
    values = astuple(state)
    return _encoder.encode(
        (*values[:_REQUEST_AT], astuple(state.request), *values[_REQUEST_AT + 1 :])
    )


def decode_state(blob: bytes) -> JobState:
    """The state a blob holds, packed or of the map form."""
    if blob[0] in _MAP_PREFIXES:
        return _map_decoder.decode(blob)
    # Positional construction, in C: keyword arguments built in Python cost 3x the decode.
    values = list(astuple(_decoder.decode(blob)))
    values[_REQUEST_AT] = EnqueueRequest(*astuple(values[_REQUEST_AT]))
    return JobState(*values)


PROJECTION = Projection(
    "queue",
    # 2: the packed state blob (1: the map form, which still decodes).
    2,
    "jl_queue",
    ("job_id",),
    COLUMNS,
    "schema_queue",
    ALL_JOB_EVENTS,
    description="one row per job: the fold of its history (what claims read)",
    blobs=(("state", decode_state),),
)


def queue_values(state: JobState, enqueue_seq: int, job_key: Any) -> tuple[Any, ...]:
    """The view row for ``state`` as values in :data:`COLUMNS` order (what a bulk insert
    sends: no dict per row); ``job_key`` is the backend's spelling of the job id."""
    subject = state.subject
    request = state.request
    return (
        job_key,
        request.job_type,
        request.queue,
        request.org,
        state.status.value,
        state.stage,
        state.priority,
        to_us(state.run_at),
        enqueue_seq,
        opt_us(state.lease_expires_at),
        state.run_number,
        state.attempt,
        state.worker_id,
        request.idempotency_key,
        subject.source_id if subject else None,
        subject.uri if subject else None,
        state.version,
        to_us(state.updated_at),
        encode_state(state),
    )


def queue_row(state: JobState, enqueue_seq: int, job_key: Any) -> dict[str, Any]:
    """The view row for ``state`` by column name (:func:`queue_values`)."""
    return dict(zip(COLUMNS, queue_values(state, enqueue_seq, job_key), strict=True))


def queue_update_row(state: JobState, job_key: Any) -> dict[str, Any]:
    """The columns ``queue_update`` sets for ``state``: the ones an event can change (the
    request's and ``enqueue_seq`` are fixed at enqueue). Built per event, so only these."""
    return {
        "job_id": job_key,
        "status": state.status.value,
        "stage": state.stage,
        "priority": state.priority,
        "run_at": to_us(state.run_at),
        "lease_expires_at": opt_us(state.lease_expires_at),
        "run_number": state.run_number,
        "attempt": state.attempt,
        "worker_id": state.worker_id,
        "version": state.version,
        "updated_at": to_us(state.updated_at),
        "state": encode_state(state),
    }


KIND: StateKind[UUID, JobState] = StateKind(
    "jobs",
    JOB_EVENTS,
    cast("Callable[[JobState | None, Event], JobState]", evolve),
    lambda job_id: job_id,  # a job's stream id is its id
    PROJECTION,
    fold="job",
)
"""Jobs, by id: folded by the job hooks (the queue's rows inserted or updated with their
queue position, the written views, the policies' triggers, the wake-ups)."""
