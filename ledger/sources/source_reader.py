"""The source reads: :class:`SourceReader`, what ``reader.sources`` hands out.

A source's sync state (one row per URI its jobs touched), the sources known to it or to a
job's subject, their polls and breakers, and a source's poll history.
"""

from __future__ import annotations

from typing import Any

from ledger.clock import Clock
from ledger.core.codec import Record
from ledger.core.source_polls.state import SourcePollState, source_stream_id
from ledger.deprecation import warn_once
from ledger.sources.source_reads import source_views
from ledger.store.store import Store
from ledger.views.kinds import SOURCE_POLLS
from ledger.views.sync_state import Source, SyncState


class SourceReader:
    """The source reads over one store; ``clock`` gives the now a breaker is judged at."""

    def __init__(self, store: Store, clock: Clock) -> None:
        self.store = store
        self.clock = clock

    def __call__(self, *, org: str | None = None, source_id: str | None = None) -> list[Source]:
        """Deprecated: ``reader.sources(...)`` was :meth:`all` before the namespace."""
        warn_once("Reader.sources()", "reader.sources.all()")
        return self.all(org=org, source_id=source_id)

    def all(self, *, org: str | None = None, source_id: str | None = None) -> list[Source]:
        """Each source known to the sync state or to a job's subject, with its URIs, last
        ingestion and jobs by status (see :meth:`Store.sources`)."""
        return self.store.sources(org=org, source_id=source_id)

    def sync_state(self, source_id: str) -> list[SyncState]:
        """The sync-state rows of one source."""
        return self.store.sync_state(source_id)

    def sync_state_of_org(self, source_id: str, org: str) -> list[SyncState]:
        """One source's sync-state rows of the subjects only ``org``'s jobs touched."""
        return self.store.sync_state_of_org(source_id, org)

    def polls(self) -> dict[str, SourcePollState]:
        """Every polled source's poll state (last poll, result, breaker), by source."""
        return {state.source: state for state in self.store.states(SOURCE_POLLS)}

    def history(self, source: str) -> list[Record]:
        """Every poll event of one source, in order (its own stream; empty: never polled)."""
        return self.store.history(source_stream_id(source))

    def overview(
        self, *, org: str | None = None, source_id: str | None = None
    ) -> list[dict[str, Any]]:
        """:meth:`all` with each source's last poll and breaker (JSON-ready; see
        :func:`ledger.sources.source_reads.source_views`); polled sources with no sync state
        yet are included unless ``org`` scopes the read."""
        polls = self.polls()
        if source_id is not None:
            polls = {source_id: polls[source_id]} if source_id in polls else {}
        return source_views(
            self.all(org=org, source_id=source_id),
            polls,
            self.clock.now(),
            polled_only_too=org is None,
        )

    def revision_snapshot(self, source_id: str) -> dict[str, str]:
        """``{uri: revision}`` for the source's rows that have a revision."""
        return {
            row.uri: row.revision
            for row in self.store.sync_state(source_id)
            if row.revision is not None
        }

    def known_uris(self, source_id: str) -> set[str]:
        """Every URI the source's sync state has a row for."""
        return {row.uri for row in self.store.sync_state(source_id)}
