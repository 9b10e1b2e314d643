"""The dead-letter view: one row per dead job, with a snapshot of the job at its death.

- ``job_dead_lettered`` adds the row (payload and checkpoint live in the snapshot);
- ``job_requeued`` removes it: the job is alive again;
- a successful ``delete`` of a sync subject prunes that subject's dead jobs: whatever failed
  earlier for the document is moot once the document is gone.
"""

from __future__ import annotations

from datetime import datetime
from uuid import UUID

import msgspec

from ledger.core.events import (
    Failure,
    JobDeadLettered,
    JobEvent,
    JobRequeued,
    JobSucceeded,
    SubjectOp,
)
from ledger.core.state import JobState
from ledger.core.times import to_us
from projections.rules.queue import encode_state
from projections.rules.writes import ViewWrite


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
                "dead_letters_insert",
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
        return [ViewWrite("dead_letters_delete", {"job_id": state.job_id})]
    subject = state.subject
    if isinstance(event, JobSucceeded) and subject is not None and subject.op is SubjectOp.DELETE:
        return [
            ViewWrite(
                "dead_letters_prune_subject", {"source_id": subject.source_id, "uri": subject.uri}
            )
        ]
    return []
