"""The ledger's reads: jobs, histories, views, audit, stats, replay checks and export, and
each feature's reads handed out as its namespace (``reader.workflows.run(run_id)``).

:class:`Reader` is what a front end that only reads takes (the CLI's queries, the HTTP API,
the dashboard); :class:`~ledger.api.ledger.Ledger` is a reader with the commands. Every read
is its own transaction (or snapshot) on a pooled connection, so a reader is thread-safe.
Reads never append, with one kind of exception: bringing a *tracked* projection to the head
(:meth:`Reader.catch_up`, and ``audit``/``stats`` by default) writes its rows, which are
derived from the history alone.

A reader on a streaming replica (:meth:`Reader.open_replica`) writes nothing at all: its
``audit``/``stats`` read the tracked views as far as the primary's catch-up brought them
(:meth:`Reader.audit_lag` says how far that is), and :meth:`Reader.replica_lag` how far the
replica is behind the primary.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Self

from ledger.api.deprecated import DeprecatedReaderMethods
from ledger.api.reader_namespaces import ReaderNamespaces
from ledger.api.view_reads import ViewReads
from ledger.clock import Clock, SystemClock
from ledger.core.events import JobEvent
from ledger.core.state import JobState
from ledger.core.values import JobDefinition, JobStatus
from ledger.views.job_pages import DEFAULT_LIMIT, JobPage
from ledger.views.kinds import DEFINITIONS

# Most imports are inside the methods that use them: a CLI read command (`jobledger show`)
# opens a Reader and calls two or three methods, and importing every read's modules (the
# projection runners, workflows, export, pools) at start-up was most of its time
# (bench/bench_cli_latency.py; issue 17, part 10).
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator, Sequence
    from datetime import datetime
    from types import TracebackType
    from uuid import UUID

    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    from ledger.api import blocker_reads
    from ledger.api.pools import LedgerHealth, PoolReport
    from ledger.core.blockers import Blocker
    from ledger.core.codec import Record
    from ledger.core.exchange import Selection
    from ledger.core.exchange_trailer import ChainSeal
    from ledger.core.integrity import ChainHead
    from ledger.core.replay_findings import JobReplay
    from ledger.store.exporter import ExportProgress, ExportReport, Write
    from ledger.store.replica import ReplicaLag
    from ledger.store.store import Store
    from ledger.store.tail import HistoryFollower
    from ledger.views.dead_letters import DeadLetter


class Reader(DeprecatedReaderMethods, ReaderNamespaces, ViewReads):
    """The reads over one store; ``clock`` gives "now" where a read needs one (stats).

    The job reads are its methods; the derived views' reads (projections, audit, stats) its
    base :class:`~ledger.api.view_reads.ViewReads`'s; each feature's reads are its namespace
    (``workflows``, ``schedules``, ``sources``, ``tokens``, ``retention``, ``limits``:
    :class:`~ledger.api.reader_namespaces.ReaderNamespaces`). The reads that were methods
    before the namespaces are deprecated aliases (:mod:`ledger.api.deprecated`)."""

    def __init__(self, store: Store, *, clock: Clock | None = None) -> None:
        self.store = store
        self.clock: Clock = clock or SystemClock()

    @classmethod
    def open_replica(
        cls,
        url: str,
        *,
        primary: str | None = None,
        clock: Clock | None = None,
        pool_size: int | None = None,
    ) -> Reader:
        """A reader on the PostgreSQL streaming replica at ``url`` (a hot standby of a
        ledger's database) that never writes; ``primary``, the primary's URL if known, makes
        :meth:`replica_lag` exact. A SQLite URL is refused (``config.invalid_url``: SQLite
        has no replicas), as is a database without this code's ledger schema. Always a plain
        :class:`Reader`, also when called on :class:`~ledger.api.ledger.Ledger`."""
        from ledger.store.config import open_replica_store

        store = open_replica_store(url, primary=primary, pool_size=pool_size)
        try:
            store.check_initialised()
        except BaseException:
            store.close()
            raise
        return Reader(store, clock=clock)

    @classmethod
    def open_with_archive(
        cls, url: str, *, clock: Clock | None = None, pool_size: int | None = None
    ) -> Reader | None:
        """A reader over the ledger at ``url`` and its archive together (every read sees
        archived jobs as hot ones; it never writes), or ``None`` if it has no archive
        (docs/architecture.md, decision 31). Always a plain :class:`Reader`."""
        from ledger.store.config import open_archive_store

        store = open_archive_store(url, pool_size=pool_size)
        if store is None:
            return None
        try:
            store.check_initialised()
        except BaseException:
            store.close()
            raise
        return Reader(store, clock=clock)

    def close(self) -> None:
        self.store.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def replica_lag(self) -> ReplicaLag | None:
        """How far behind its primary the replica read is (``None``: not a replica), measured
        now (see :class:`~ledger.store.replica.ReplicaLag`)."""
        return self.store.replica_lag()

    # --- jobs and their histories -------------------------------------------------------------

    def get(self, job_id: UUID) -> JobState | None:
        """A job's current state (from the queue view)."""
        return self.store.get_job(job_id)

    def get_many(self, job_ids: Sequence[UUID]) -> dict[UUID, JobState]:
        """Many jobs' current states in one read; unknown ids are left out."""
        return self.store.get_jobs(job_ids)

    def history(self, job_id: UUID) -> list[Record]:
        """Every event of a job, in order (empty if there is no such job)."""
        records = self.store.history(job_id)
        if records and not isinstance(records[0].event, JobEvent):
            return []  # a job type's definition stream, not a job
        return records

    def state_at(
        self, job_id: UUID, *, version: int | None = None, at: datetime | None = None
    ) -> JobState | None:
        """The job as it was after event ``version``, or at time ``at`` (``None`` before it
        existed): the fold of the matching prefix of its history."""
        from ledger.core.diagnostics import current_state
        from ledger.core.facts import history_prefix

        return current_state(history_prefix(self.history(job_id), version=version, at=at))

    def follow_history(
        self,
        job_id: UUID,
        *,
        poll_s: float = 0.5,
        linger_s: float = 1.0,
        timeout_s: float | None = None,
    ) -> HistoryFollower:
        """A follower of the job's events, old then new as they commit, until the job is
        terminal and quiet for ``linger_s`` or ``timeout_s`` passes (see
        :mod:`ledger.store.tail`)."""
        from ledger.store.tail import HistoryFollower

        return HistoryFollower(
            self.store, job_id, poll_s=poll_s, linger_s=linger_s, timeout_s=timeout_s
        )

    def counts(self) -> dict[str, int]:
        """Jobs per status."""
        return self.store.count_by_status()

    def jobs(
        self,
        *,
        statuses: Iterable[JobStatus] = (),
        job_type: str | None = None,
        org: str | None = None,
        limit: int = DEFAULT_LIMIT,
        cursor: int | None = None,
        queue: str | None = None,
    ) -> JobPage:
        """One page of the current jobs, newest enqueue first (any status if ``statuses`` is
        empty; ``queue="default"`` includes the jobs enqueued without a queue). Pass a page's
        ``next_cursor`` as ``cursor`` for the next one."""
        from ledger.store.queue_reads import list_jobs
        from ledger.views.job_pages import job_query

        query = job_query(statuses, job_type, org, limit, cursor, queue=queue)
        return list_jobs(self.store, query)

    def jobs_at(
        self,
        at: datetime,
        *,
        statuses: Iterable[JobStatus] = (),
        job_type: str | None = None,
        org: str | None = None,
        limit: int = DEFAULT_LIMIT,
        cursor: int | None = None,
        progress: Callable[[int, int], None] | None = None,
        queue: str | None = None,
    ) -> JobPage:
        """:meth:`jobs` as it was at ``at``: each job folded from its history up to its first
        event later than ``at`` (as :meth:`state_at`); jobs enqueued later are absent. Reads
        the whole history in batches; ``progress(position, head)`` follows it."""
        from ledger.store.queue_reads import jobs_at
        from ledger.views.job_pages import job_query

        query = job_query(statuses, job_type, org, limit, cursor, queue=queue)
        return jobs_at(self.store, at, query, progress=progress)

    # --- job types and dead letters -----------------------------------------------------------

    def definition(self, job_type: str) -> JobDefinition | None:
        """The current definition of ``job_type`` (``None`` if it is not defined)."""
        for state in self.store.states(DEFINITIONS):
            if state.definition.job_type == job_type:
                return state.definition
        return None

    def definitions(self) -> list[JobDefinition]:
        """Every job type's current definition."""
        return [state.definition for state in self.store.states(DEFINITIONS)]

    def dead_letters(
        self, job_type: str | None = None, *, org: str | None = None
    ) -> list[DeadLetter]:
        """Dead jobs (optionally of one type, of one org), oldest death first."""
        return self.store.dead_letters(job_type, org=org)

    # --- decision replay (jobledger replay --check; see ledger/core/decision_replay.py) -------

    def replay_check(self, job_id: UUID) -> JobReplay:
        """Re-run the current decisions over one job's history (or a workflow run's, given
        its id) and report what differs."""
        from ledger.store import replay_reads

        return replay_reads.check_job(self.store, job_id)

    def replay_check_all(
        self, *, job_type: str | None = None, batch_size: int = 500
    ) -> Iterator[JobReplay]:
        """:meth:`replay_check` for every job (or every job of ``job_type``), then (without a
        type) every workflow run (``kind`` ``workflow``), streamed from one read snapshot,
        ``batch_size`` jobs or runs at a time (see :mod:`ledger.store.replay_reads`)."""
        from ledger.store import replay_reads

        return replay_reads.check_all(self.store, job_type=job_type, batch_size=batch_size)

    # --- export (ledger/core/exchange.py, docs/export-format.md) ------------------------------

    def export_history(
        self,
        write: Write,
        selection: Selection | None = None,
        *,
        progress: ExportProgress | None = None,
        signing_key: Ed25519PrivateKey | str | os.PathLike[str] | None = None,
    ) -> ExportReport:
        """Write the whole histories of the selected jobs (all by default), after the
        definition streams they use, and then their workflow runs' (every run by default),
        as exchange-format lines through ``write``; one snapshot. ``signing_key`` (a key or
        a PEM file's path): a sealed file (format version 3), whose trailer binds its digest
        to this ledger's chain head under the key's signature (docs/integrity.md)."""
        from ledger.core.exchange import Selection
        from ledger.store.exporter import Exporter

        seal = None
        if signing_key is not None:
            from ledger.core.exchange_trailer import make_seal
            from ledger.integrity.keys import load_signing_key

            key = (
                load_signing_key(signing_key)
                if isinstance(signing_key, str | os.PathLike)
                else signing_key
            )

            def seal(digest: str, head: ChainHead) -> ChainSeal:
                return make_seal(key, digest, head.events, head.position, head.chain)

        return Exporter(self.store).export(write, selection or Selection(), progress, seal=seal)

    # --- wake-ups -----------------------------------------------------------------------------

    def on_jobs_available(self, listener: Callable[[], None]) -> None:
        """Call ``listener()`` after this process commits work that may be claimable."""
        self.store.add_listener(listener)

    def remove_listener(self, listener: Callable[[], None]) -> None:
        """Stop calling a listener given to :meth:`on_jobs_available`."""
        self.store.remove_listener(listener)

    # --- worker pools' reports (operational state: ledger/api/pools.py) ---------------------

    def blockers(self, job: UUID | JobState, now: datetime | None = None) -> list[Blocker]:
        """Why the job (its id, or its state as read) is not running at ``now`` (the
        clock's by default): its ``run_at`` still to come, its queue paused, its rate key out
        of tokens, its type's circuit breaker open in a live pool, its type disabled, its
        concurrency limits reached (:mod:`ledger.core.blockers`). Empty for a job that is
        not pending, or pending with nothing holding it back."""
        from ledger.api import blocker_reads
        from ledger.limits import limit_reads

        state = job if isinstance(job, JobState) else self.get(job)
        if state is None or state.status is not JobStatus.PENDING:
            return []
        at = now or self.clock.now()
        found = blocker_reads.blockers_of(state, blocker_reads.read_facts(self.store, at), at)
        return found + limit_reads.blockers(self.store, state)

    def held_back(self, now: datetime | None = None) -> list[blocker_reads.HeldBack]:
        """What holds back pending jobs at ``now`` (the clock's by default): paused queues,
        rate keys without a token, circuit breakers open in live pools, disabled types."""
        from ledger.api import blocker_reads

        return blocker_reads.held_back(self.store, now or self.clock.now())

    def pools(self) -> list[PoolReport]:
        """Every worker pool's latest report of itself, by id (stale ones included)."""
        from ledger.api.pools import read_pools

        return read_pools(self.store)

    def health(self, now: datetime | None = None) -> LedgerHealth:
        """``ok``, or ``degraded`` with the reasons (no live pool, a stale pool counted dead,
        a pool reporting itself degraded), judged at ``now`` (the clock's by default)."""
        from ledger.api.pools import assess_pools

        return assess_pools(self.pools(), now or self.clock.now())
