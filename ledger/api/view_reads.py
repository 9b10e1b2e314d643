"""The reads of the derived views: :class:`ViewReads`, a base of :class:`~ledger.api.reader.Reader`.

The projections' rebuild, verify and catch-up; the audit view's pages and lag; the stats;
and the counts the metrics read (each tracked view's lag, the event totals, the jobs per
status and type). What they share: each reads a view derived from the history, and the
tracked ones are first brought to the head (writing only rows derived from the history),
except on a replica, whose views the primary's catch-up brings.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ledger.clock import Clock
from ledger.core.errors import ReadOnlyDatabaseError

# Imports inside the methods, as the reader's: a read command loads only what it reads.
if TYPE_CHECKING:
    from collections.abc import Sequence
    from datetime import datetime

    from ledger.store.store import Store
    from ledger.views.audit_query import AuditPage, AuditQuery
    from projections.rebuilder import Progress, Rebuilder
    from projections.stats import Stats
    from projections.tracked import CatchUp

CATCH_UP_WAIT_S = 10.0
"""How long a catch-up waits for the transactions committed before it to become final (an
older one of any session of the server still in flight holds them back)."""


class ViewReads:
    """The view reads over a reader's store (``clock`` gives the stats' default now)."""

    store: Store
    clock: Clock

    def projections(self, *, progress: Progress | None = None) -> Rebuilder:
        """Rebuild, verify and status of the views (see :mod:`projections.rebuilder`);
        ``progress(phase, done, total)`` is called as the work advances."""
        from projections.rebuilder import Rebuilder

        return Rebuilder(self.store, progress=progress)

    def catch_up(self, names: Sequence[str] | None = None) -> list[CatchUp]:
        """Run the tracked projections named (all by default) to the head of the history.
        Refused on a replica (``store.read_only``): the primary's catch-up reaches it."""
        from ledger.views.catalog import resolve, tracked
        from projections.tracked import TrackedRunner

        if self.store.read_only:
            raise ReadOnlyDatabaseError(
                "a replica's tracked projections are caught up on its primary "
                "(`jobledger projections catch-up` or `follow` there), never on the replica"
            )
        return [
            TrackedRunner(self.store, p).catch_up(wait_s=CATCH_UP_WAIT_S)
            for p in tracked(resolve(names))
        ]

    def _catch_up_audit(self) -> None:
        """:meth:`catch_up` of the audit view alone, before a read of it: the tracked
        runner's default view, so the catalogue of every view is not imported (a read
        command's start-up; the caller has checked the store is not a replica)."""
        from projections.tracked import TrackedRunner

        TrackedRunner(self.store).catch_up(wait_s=CATCH_UP_WAIT_S)

    def audit(self, query: AuditQuery, *, catch_up: bool = True) -> AuditPage:
        """One page of audit rows (``query.cursor``: the page after a previous one) and the
        next page's cursor; with ``catch_up`` the audit view is first brought to the head, so
        the rows include every event committed before the call. On a replica nothing is
        caught up: the rows stop where the audit view stands (:meth:`audit_lag`)."""
        from ledger.store.audit_reads import read_page

        if catch_up and not self.store.read_only:
            self._catch_up_audit()
        return read_page(self.store, query)

    def audit_lag(self) -> int:
        """How many events of the history the audit view has yet to apply (0 once caught
        up): on a replica, what the primary's catch-up had not applied when it was read."""
        from ledger.views.audit import PROJECTION as AUDIT
        from ledger.views.stream_events import TailPosition

        with self.store.read_snapshot() as tables:
            return tables.count_after(tables.tail_positions().get(AUDIT.name, TailPosition()))

    def stats(
        self, now: datetime | None = None, *, catch_up: bool = True, org: str | None = None
    ) -> Stats:
        """Counts, throughput windows, oldest due job and run times at ``now`` (the clock's
        by default), of one ``org``'s jobs if given; with ``catch_up`` the audit view is
        first brought to the head (not on a replica: ``audit_lag`` in the figures says how
        far behind it is)."""
        from projections.stats import collect

        if catch_up and not self.store.read_only:
            self._catch_up_audit()
        return collect(self.store, now or self.clock.now(), org=org)

    def projection_lags(self) -> dict[str, int]:
        """Per tracked projection, how many events of the history it has yet to apply."""
        from ledger.views.catalog import TRACKED

        with self.store.read_snapshot() as tables:
            head = tables.head()
            positions = tables.tracking()
        return {projection.name: head - positions.get(projection.name, 0) for projection in TRACKED}

    def event_totals(self) -> dict[tuple[str, str], int]:
        """How many ``job_enqueued``, ``job_succeeded``, ``job_failed`` and
        ``job_dead_lettered`` events there are per (event, job type), as far as the audit view
        has applied the history (``jl_audit_event_idx``): ever-growing counts, since the
        history only grows."""
        return {
            (row["event"], row["job_type"]): int(row["n"])
            for row in self.store.read("audit_event_totals")
        }

    def counts_by_type(self) -> dict[tuple[str, str], int]:
        """Jobs per (status, type), from the queue view (``jl_queue_listing_idx``)."""
        return {
            (row["status"], row["job_type"]): int(row["n"])
            for row in self.store.read("queue_counts_by_type")
        }
