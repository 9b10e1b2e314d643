"""What a backend's archive moves and reports, whatever the backend, and the store's hooks a
backend overrides to archive (:class:`Archiving`, decision 31; the SQLite archive file:
:mod:`ledger.store.sqlite.archive`; PostgreSQL's detached months:
:mod:`ledger.store.postgres.month_archiving`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, ClassVar, NamedTuple
from uuid import UUID

from ledger.core.errors import RetentionUnsupportedError
from ledger.core.events import Event

if TYPE_CHECKING:
    from datetime import datetime

ArchivedEvent = Callable[[list[UUID], dict[str, int]], Event]
"""Builds a retention batch's event from the jobs it moved and the rows moved per table."""


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


class Archiving:
    """A store's retention hooks (decision 31): where it archives, the move there, the units
    it moves and the sizes it reports. A store that cannot archive keeps these: it refuses
    the move and has nothing to report."""

    backend: ClassVar[str]

    @property
    def archive_where(self) -> str | None:
        """Where :meth:`move_to_archive` moves jobs (``None``: this backend cannot yet)."""
        return None

    def move_to_archive(
        self,
        job_versions: Mapping[UUID, int],
        event_for: ArchivedEvent,
        *,
        now: datetime | None = None,
    ) -> ArchiveMove:
        """Move finished jobs, each still at the version it was chosen at, out of the hot
        tables into the archive, with the event ``event_for`` builds in the transaction that
        removes them; jobs that changed meanwhile stay. ``now`` is the run's time (PostgreSQL
        detaches only months wholly before it)."""
        raise archive_unsupported(self.backend)

    def ensure_partitions(self, now: datetime, ahead: int = 3) -> list[str]:
        """Make the archive units of ``now``'s month and ``ahead`` more where the backend
        archives by month (PostgreSQL: the events table's partitions); those made."""
        return []

    def archive_units(self, job_versions: Mapping[UUID, int], now: datetime) -> list[ArchiveUnit]:
        """The units a run moves whole, if this backend moves jobs by unit (PostgreSQL: the
        past months of the events table), and whether each would move now."""
        return []

    def table_sizes(self) -> dict[str, int]:
        """Rows per table that retention moves, hot and archived, and bytes on disk."""
        return {}
