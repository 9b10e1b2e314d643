"""The store's own reads: the few backend-neutral ones the commands and the CLI use.

:class:`StoreReads` is mixed into :class:`~ledger.store.store.Store`. Each read is one named
query in a transaction of its own (:meth:`~ledger.store.store.Store.read`), or the
eventsourcing recorder's for a stream's events: jobs by id, dead letters and counts from the
queue view, the sources and their sync state, the states of a kind of state
(:mod:`ledger.store.kind_reads`), the rate buckets, one stream's history and the head of the
events. What reads many queries in one snapshot is
:meth:`~ledger.store.store.Store.read_snapshot` (:mod:`ledger.store.reads`); what a
transaction reads before it writes, its unit of work (:mod:`ledger.store.unit_of_work`).
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, TypeVar
from uuid import UUID

from ledger.core.codec import EventCodec, Record
from ledger.core.events import JobEvent
from ledger.core.times import from_us

if TYPE_CHECKING:
    from ledger.core.state import JobState
    from ledger.store.ids import IdAdapter
    from ledger.store.replica import ReplicaLag
    from ledger.views.dead_letters import DeadLetter
    from ledger.views.kind import StateKind
    from ledger.views.rate_buckets import RateBucket
    from ledger.views.sync_state import Source, SyncState

K = TypeVar("K")
S = TypeVar("S")


class StoreReads:
    """The store's reads that are not a backend's (see the module docstring)."""

    codec: EventCodec
    ids: IdAdapter
    recorder: Any

    @abstractmethod
    def read(self, query: str, params: Mapping[str, Any] | None = None) -> list[Any]: ...

    @abstractmethod
    def _errors_mapped(self) -> AbstractContextManager[None]: ...

    def get_jobs(self, job_ids: Sequence[UUID]) -> dict[UUID, JobState]:
        """The current states of those of ``job_ids`` that exist, read without locks."""
        from ledger.views.queue import decode_state

        if not job_ids:
            return {}
        rows = self.read("queue_get_many", {"job_ids": self.ids.keys(job_ids)})
        states = self.caught_up([decode_state(row["state"]) for row in rows])
        return {state.job_id: state for state in states}

    rows_may_lag: bool = False
    """Whether a leased job's row may be behind its stream (:mod:`ledger.views.queue_lag`):
    then every state read from the queue view is caught up (:meth:`caught_up`)."""

    def caught_up(self, states: Sequence[JobState]) -> list[JobState]:
        """``states`` read from the queue view, each with the events its row has not folded
        yet folded on (none on a backend whose rows never lag)."""
        if not self.rows_may_lag:
            return list(states)
        from ledger.store.trailing_events import with_trailing

        return with_trailing(self.read, self.codec, self.ids, states)

    def get_job(self, job_id: UUID) -> JobState | None:
        """One job's current state (from the queue view), or ``None``."""
        return self.get_jobs([job_id]).get(job_id)

    def sync_state(self, source_id: str) -> list[SyncState]:
        """Every sync-state row of one source, by URI."""
        return [
            _sync_state_of(row)
            for row in self.read("sync_state_of_source", {"source_id": source_id})
        ]

    def sync_state_of_org(self, source_id: str, org: str) -> list[SyncState]:
        """The sync-state rows of one source whose subject only ``org``'s jobs touched (the
        view has no org: a subject another org's job also synced is left out)."""
        rows = self.read("sync_state_of_source_of_org", {"source_id": source_id, "org": org})
        return [_sync_state_of(row) for row in rows]

    def sources(self, *, org: str | None = None, source_id: str | None = None) -> list[Source]:
        """Each source known to the sync-state view or to a job's subject: its URIs, last
        ingestion and jobs by status (of ``org``'s subjects and jobs only, if given), by
        source id; ``source_id``: only that one."""
        from ledger.views.sync_state import Source

        if org is None:
            summary = self.read("sources_summary")
            counts = self.read("source_job_counts", {"source_id": source_id})
        else:
            summary = self.read("sources_summary_of_org", {"org": org})
            counts = self.read("source_job_counts_of_org", {"org": org, "source_id": source_id})
        found: dict[str, Source] = {}
        for row in summary:
            if source_id is None or row["source_id"] == source_id:
                last = row["last_ingested_at"]
                found[row["source_id"]] = Source(
                    row["source_id"], int(row["uris"]), None if last is None else from_us(last), {}
                )
        for row in counts:
            source = found.setdefault(row["source_id"], Source(row["source_id"], 0, None, {}))
            source.jobs[str(row["status"])] = int(row["n"])
        return [found[key] for key in sorted(found)]

    def dead_letters(
        self, job_type: str | None = None, *, org: str | None = None
    ) -> list[DeadLetter]:
        """Dead jobs (optionally of one type, of one org), oldest death first."""
        from ledger.views.dead_letters import DeadLetter
        from ledger.views.queue import decode_state

        if org is not None:
            rows = self.read("dead_letters_of_org", {"job_type": job_type, "org": org})
        elif job_type is None:
            rows = self.read("dead_letters_all")
        else:
            rows = self.read("dead_letters_of_type", {"job_type": job_type})
        letters = []
        for row in rows:
            snapshot = decode_state(row["snapshot"])
            assert snapshot.last_error is not None and snapshot.finished_at is not None
            letters.append(
                DeadLetter(
                    job_id=snapshot.job_id,
                    job_type=snapshot.job_type,
                    dead_at=snapshot.finished_at,
                    failure=snapshot.last_error,
                    snapshot=snapshot,
                )
            )
        return letters

    def states(self, kind: StateKind[Any, S]) -> list[S]:
        """Every state of ``kind`` its view holds (job types, tokens, schedules, source polls,
        queue states, a registered kind's), in its ``all`` query's order."""
        from ledger.store.kind_reads import read_all

        return read_all(kind, self.read)

    def state(self, kind: StateKind[K, S], key: K) -> S | None:
        """One state of ``kind`` from its view (``None``: there is none)."""
        from ledger.store.kind_reads import read_states

        found: dict[K, S] = read_states(kind, [key], self.read, self.ids)
        return found.get(key)

    def rate_buckets(self) -> list[RateBucket]:
        """Every rate-limit key's bucket, from the rate-bucket view."""
        from ledger.views.rate_buckets import bucket_of_row

        return [bucket_of_row(row) for row in self.read("rate_buckets_all")]

    def count_by_status(self) -> dict[str, int]:
        """How many jobs the queue view holds in each status."""
        return {row["status"]: row["n"] for row in self.read("queue_counts")}

    def history(self, originator_id: UUID) -> list[Record]:
        """Every event of one stream (a job, or a job type's definitions), in order."""
        with self._errors_mapped():
            stored_events = self.recorder.select_events(originator_id)
        return [
            Record(
                stored.originator_id,
                stored.originator_version,
                self.codec.decode(stored.topic, stored.state),
            )
            for stored in stored_events
        ]

    def job_events(self, job_id: UUID) -> Iterator[JobEvent]:
        """One job's events, in order."""
        for record in self.history(job_id):
            assert isinstance(record.event, JobEvent)
            yield record.event

    def replica_lag(self) -> ReplicaLag | None:
        """How far behind its primary this store's database is, if it is a replica
        (:mod:`ledger.store.replica`); ``None`` for a ledger's own database."""
        return None

    def head_position(self) -> int:
        """The notification id of the newest event (0 when there is none)."""
        with self._errors_mapped():
            return int(self.recorder.max_notification_id() or 0)


def _sync_state_of(row: Mapping[str, Any]) -> SyncState:
    """One ``jl_sync_state`` row as its value."""
    from ledger.views.sync_state import SyncState

    return SyncState(
        source_id=row["source_id"],
        uri=row["uri"],
        revision=row["revision"],
        content_hash=row["content_hash"],
        last_seen_at=from_us(row["last_seen_at"]),
        last_ingested_at=from_us(row["last_ingested_at"]),
    )
