"""A job's recorded events, read for the commands that show or replay them (an unknown id is a
clear error)."""

from __future__ import annotations

from uuid import UUID

from ledger.api.reader import Reader
from ledger.core.codec import Record
from ledger.core.errors import JobNotFoundError


def job_records(reader: Reader, job: UUID) -> list[Record]:
    """The job's events, in order; raises :class:`JobNotFoundError` for an unknown id."""
    records = reader.history(job)
    if not records:  # history() is empty for an unknown id and for a job type's stream
        raise JobNotFoundError(f"no job {job}")
    return records
