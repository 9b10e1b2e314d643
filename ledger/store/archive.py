"""What a backend's archive moves and reports, whatever the backend (the SQLite archive file:
:mod:`ledger.store.sqlite.archive`)."""

from __future__ import annotations

from typing import NamedTuple
from uuid import UUID

from ledger.core.errors import RetentionUnsupportedError


def archive_unsupported(backend: str) -> RetentionUnsupportedError:
    """The refusal of a store that cannot archive (a PostgreSQL database made before the
    partitioned events table: decision 31)."""
    return RetentionUnsupportedError(
        f"this {backend} database's events table predates partitions, so no month can be "
        "detached from it (docs/architecture.md, decision 31); a database created since "
        "(`jobledger migrate` on an empty one) has them: copy the ledger there with "
        "`jobledger export` / `import`. `retention run --dry-run` works here"
    )


class RetentionCandidate(NamedTuple):
    """A finished job past the shortest rule's age, from the hot queue view."""

    job_id: UUID
    job_type: str
    status: str
    version: int
    updated_at_us: int
    last_position: int
    """The notification id of the job's newest event."""


class ArchiveMove(NamedTuple):
    """What one batch's move did."""

    moved: list[UUID]
    """The jobs whose events and rows left the hot tables (named by the batch's event)."""
    changed: list[UUID]
    """Jobs that changed between the choice and the move (a requeue): kept hot. Jobs another
    run moved meanwhile are in neither list."""
    rows: dict[str, int]
    """Rows moved per table."""


class ArchiveUnit(NamedTuple):
    """A unit a backend archives whole (a PostgreSQL month partition) and what holds it."""

    name: str
    streams: int
    """The streams (jobs, or a name-derived stream) with events in it."""
    eligible: int
    """Those that are jobs a run may move now; it moves when all are."""
