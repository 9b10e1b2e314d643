"""The dead-letter view: one row per dead job, with a snapshot of the job at its death.

- ``job_dead_lettered`` adds the row (payload and checkpoint live in the snapshot);
- ``job_requeued`` removes it: the job is alive again;
- a successful ``delete`` of a sync subject prunes that subject's dead jobs: whatever failed
  earlier for the document is moot once the document is gone.
"""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime
from uuid import UUID

import msgspec

from ledger.core.events import JobDeadLettered, JobEvent, JobRequeued, JobSucceeded
from ledger.core.state import JobState
from ledger.core.times import to_us
from ledger.core.values import Failure, SubjectOp
from ledger.views.queue import decode_state, encode_state
from ledger.views.view import Key, MemoryTable, Params, Projection, WrittenView
from ledger.views.writes import ViewWrite

PROJECTION = Projection(
    "dead_letters",
    1,
    "jl_dead_letters",
    ("job_id",),
    (
        "job_id",
        "job_type",
        "org",
        "source_id",
        "uri",
        "run_number",
        "attempt",
        "code",
        "dead_at",
        "snapshot",
    ),
    "schema_dead_letters",
    (JobDeadLettered.name, JobRequeued.name, JobSucceeded.name),
    description="one row per dead job, with its state at death",
    blobs=(("snapshot", decode_state),),
)


class DeadLetter(msgspec.Struct, frozen=True):
    """One row of the view: the job as it was when it died."""

    job_id: UUID
    job_type: str
    dead_at: datetime
    failure: Failure
    snapshot: JobState


def writes(event: JobEvent, state: JobState) -> list[ViewWrite]:
    """The dead-letter writes ``event`` causes, given the job's state after it."""
    if isinstance(event, JobDeadLettered):
        subject = state.subject
        return [
            ViewWrite(
                INSERT,
                {
                    "job_id": state.job_id,
                    "job_type": state.job_type,
                    "org": state.org,
                    "source_id": subject.source_id if subject else None,
                    "uri": subject.uri if subject else None,
                    "run_number": state.run_number,
                    "attempt": state.attempt,
                    "code": event.failure.code,
                    "dead_at": to_us(event.at),
                    "snapshot": encode_state(state),
                },
            )
        ]
    if isinstance(event, JobRequeued):
        return [ViewWrite(DELETE, {"job_id": state.job_id})]
    subject = state.subject
    if isinstance(event, JobSucceeded) and subject is not None and subject.op is SubjectOp.DELETE:
        return [ViewWrite(PRUNE_SUBJECT, {"source_id": subject.source_id, "uri": subject.uri})]
    return []


# --- the named writes (ledger/store/sql/<backend>.sql) and their in-memory twins -----------

INSERT = "dead_letters_insert"
DELETE = "dead_letters_delete"
PRUNE_SUBJECT = "dead_letters_prune_subject"


class DeadLetterTable(MemoryTable):
    """The rows, and the keys of each subject's rows (what ``jl_dead_letters_subject_idx``
    gives the prune)."""

    def __init__(self) -> None:
        super().__init__()
        self.by_subject: dict[Key, set[Key]] = {}

    def drop(self, key: Key) -> None:
        row = self.rows.pop(key, None)
        if row is None or row["source_id"] is None:
            return
        subject = (row["source_id"], row["uri"])
        keys = self.by_subject.get(subject)
        if keys is not None:
            keys.discard(key)
            if not keys:
                del self.by_subject[subject]


def _apply_insert(table: DeadLetterTable, params: Params) -> Collection[Key]:
    """A plain ``INSERT`` (a duplicate key would have failed the live transaction, so a
    stored history never holds one)."""
    key = (params["job_id"],)
    table.rows[key] = dict(params)
    if params["source_id"] is not None:
        table.by_subject.setdefault((params["source_id"], params["uri"]), set()).add(key)
    return (key,)


def _apply_delete(table: DeadLetterTable, params: Params) -> Collection[Key]:
    """``DELETE`` by ``job_id``."""
    key = (params["job_id"],)
    table.drop(key)
    return (key,)


def _apply_prune_subject(table: DeadLetterTable, params: Params) -> Collection[Key]:
    """``DELETE … WHERE source_id = … AND uri = …``."""
    keys = table.by_subject.pop((params["source_id"], params["uri"]), set())
    for key in keys:
        table.drop(key)
    return keys


VIEW = WrittenView(
    projection=PROJECTION,
    writes=writes,
    applies={INSERT: _apply_insert, DELETE: _apply_delete, PRUNE_SUBJECT: _apply_prune_subject},
    new_table=DeadLetterTable,
    events=(JobDeadLettered, JobRequeued, JobSucceeded),
)
