"""A job's recorded events, read for the replay commands (an unknown id is a clear error)."""

from __future__ import annotations

from collections.abc import Sequence
from uuid import UUID

from ledger.api.ledger import Ledger
from ledger.core.codec import Record
from ledger.core.errors import JobNotFoundError
from ledger.core.events import JobEvent
from ledger.core.state import JobState, evolve


def job_records(ledger: Ledger, job: UUID) -> list[Record]:
    """The job's events, in order; raises :class:`JobNotFoundError` for an unknown id."""
    records = ledger.history(job)
    if not records:  # history() is empty for an unknown id and for a job type's stream
        raise JobNotFoundError(f"no job {job}")
    return records


def fold_records(records: Sequence[Record]) -> JobState | None:
    """The state the records fold to."""
    state: JobState | None = None
    for record in records:
        assert isinstance(record.event, JobEvent)
        state = evolve(state, record.event)
    return state
