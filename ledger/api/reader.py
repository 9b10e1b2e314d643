"""The ledger's reads: jobs, histories, views, audit, stats, replay checks and export.

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

from typing import TYPE_CHECKING, Any, Self

from ledger.clock import Clock, SystemClock
from ledger.core.errors import ReadOnlyDatabaseError
from ledger.core.events import JobEvent
from ledger.core.state import JobState
from ledger.core.values import JobDefinition, JobStatus
from projections.rules.job_list import DEFAULT_LIMIT, JobPage

# Most imports are inside the methods that use them: a CLI read command (`jobledger show`)
# opens a Reader and calls two or three methods, and importing every read's modules (the
# projection runners, workflows, export, pools) at start-up was most of its time
# (bench/bench_cli_latency.py; issue 17, part 10).
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator, Sequence
    from datetime import datetime
    from types import TracebackType
    from uuid import UUID

    from ledger.api import blocking
    from ledger.api.pools import LedgerHealth, PoolReport
    from ledger.api.queues import QueueSummary
    from ledger.api.workflow_views import TimelineEntry, WorkflowGraph
    from ledger.core.blockers import Blocker
    from ledger.core.codec import Record
    from ledger.core.concurrency import LimitUse
    from ledger.core.exchange import Selection
    from ledger.core.replay_findings import JobReplay
    from ledger.core.source_polls.state import SourcePollState
    from ledger.core.tokens import TokenState
    from ledger.store.exporter import ExportProgress, ExportReport, Write
    from ledger.store.replica import ReplicaLag
    from ledger.store.store import Store
    from ledger.store.tail import HistoryFollower
    from ledger.store.workflow_reads import RunPage, RunView, StepView
    from projections.rules.audit_query import AuditPage, AuditQuery
    from projections.rules.dead_letters import DeadLetter
    from projections.rules.rate_buckets import RateBucket
    from projections.rules.sync_state import Source, SyncState
    from projections.runners.rebuilder import Progress, Rebuilder
    from projections.runners.stats import Stats
    from projections.runners.tracked import CatchUp

CATCH_UP_WAIT_S = 10.0
"""How long a catch-up waits for the transactions committed before it to become final (an
older one of any session of the server still in flight holds them back)."""


class Reader:
    """The reads over one store; ``clock`` gives "now" where a read needs one (stats)."""

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
        from ledger.store.job_views import list_jobs
        from projections.rules.job_list import job_query

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
        from ledger.store.job_views import jobs_at
        from projections.rules.job_list import job_query

        query = job_query(statuses, job_type, org, limit, cursor, queue=queue)
        return jobs_at(self.store, at, query, progress=progress)

    # --- job types, sync state, dead letters -------------------------------------------------

    def definition(self, job_type: str) -> JobDefinition | None:
        """The current definition of ``job_type`` (``None`` if it is not defined)."""
        for state in self.store.all_definitions():
            if state.definition.job_type == job_type:
                return state.definition
        return None

    def definitions(self) -> list[JobDefinition]:
        """Every job type's current definition."""
        return [state.definition for state in self.store.all_definitions()]

    def sync_state(self, source_id: str) -> list[SyncState]:
        """The sync-state rows of one source."""
        return self.store.sync_state(source_id)

    def sync_state_of_org(self, source_id: str, org: str) -> list[SyncState]:
        """One source's sync-state rows of the subjects only ``org``'s jobs touched."""
        return self.store.sync_state_of_org(source_id, org)

    def sources(self, *, org: str | None = None, source_id: str | None = None) -> list[Source]:
        """Each source known to the sync state or to a job's subject, with its URIs, last
        ingestion and jobs by status (see :meth:`Store.sources`)."""
        return self.store.sources(org=org, source_id=source_id)

    def source_polls(self) -> dict[str, SourcePollState]:
        """Every polled source's poll state (last poll, result, breaker), by source."""
        return {state.source: state for state in self.store.source_polls()}

    def source_history(self, source: str) -> list[Record]:
        """Every poll event of one source, in order (its own stream; empty: never polled)."""
        from ledger.core.source_polls.state import source_stream_id

        return self.store.history(source_stream_id(source))

    def source_overview(
        self, *, org: str | None = None, source_id: str | None = None
    ) -> list[dict[str, Any]]:
        """:meth:`sources` with each source's last poll and breaker (JSON-ready; see
        :func:`ledger.api.source_views.source_views`); polled sources with no sync state
        yet are included unless ``org`` scopes the read."""
        from ledger.api.source_views import source_views

        polls = self.source_polls()
        if source_id is not None:
            polls = {source_id: polls[source_id]} if source_id in polls else {}
        return source_views(
            self.sources(org=org, source_id=source_id),
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

    def dead_letters(
        self, job_type: str | None = None, *, org: str | None = None
    ) -> list[DeadLetter]:
        """Dead jobs (optionally of one type, of one org), oldest death first."""
        return self.store.dead_letters(job_type, org=org)

    # --- projections, audit and stats ---------------------------------------------------------

    def projections(self, *, progress: Progress | None = None) -> Rebuilder:
        """Rebuild, verify and status of the views (see :mod:`projections.runners.rebuilder`);
        ``progress(phase, done, total)`` is called as the work advances."""
        from projections.runners.rebuilder import Rebuilder

        return Rebuilder(self.store, progress=progress)

    def catch_up(self, names: Sequence[str] | None = None) -> list[CatchUp]:
        """Run the tracked projections named (all by default) to the head of the history.
        Refused on a replica (``store.read_only``): the primary's catch-up reaches it."""
        from projections.rules.catalog import resolve, tracked
        from projections.runners.tracked import TrackedRunner

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
        from projections.runners.tracked import TrackedRunner

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
        from projections.rules.audit import PROJECTION as AUDIT
        from projections.rules.stream_events import TailPosition

        with self.store.read_snapshot() as tables:
            return tables.count_after(tables.tail_positions().get(AUDIT.name, TailPosition()))

    def stats(
        self, now: datetime | None = None, *, catch_up: bool = True, org: str | None = None
    ) -> Stats:
        """Counts, throughput windows, oldest due job and run times at ``now`` (the clock's
        by default), of one ``org``'s jobs if given; with ``catch_up`` the audit view is
        first brought to the head (not on a replica: ``audit_lag`` in the figures says how
        far behind it is)."""
        from projections.runners.stats import collect

        if catch_up and not self.store.read_only:
            self._catch_up_audit()
        return collect(self.store, now or self.clock.now(), org=org)

    # --- concurrency limits (ledger/api/limit_reads.py) -----------------------------------

    def concurrency_limits(self) -> list[LimitUse]:
        """Every concurrency limit and the live leases it counts now (``jobledger stats``)."""
        from ledger.api import limit_reads

        return limit_reads.concurrency_limits(self.store)

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
    ) -> ExportReport:
        """Write the whole histories of the selected jobs (all by default), after the
        definition streams they use, and then their workflow runs' (every run by default),
        as exchange-format lines through ``write``; one snapshot."""
        from ledger.core.exchange import Selection
        from ledger.store.exporter import Exporter

        return Exporter(self.store).export(write, selection or Selection(), progress)

    # --- wake-ups -----------------------------------------------------------------------------

    # --- workflows ------------------------------------------------------------------------

    def workflow_run(self, run_id: UUID) -> RunView | None:
        """A run's header as the workflow view holds it (``None``: no such run)."""
        from ledger.store import workflow_reads

        return workflow_reads.run_view(self.store, run_id)

    def workflow_history(self, run_id: UUID) -> list[Record]:
        """Every event of a run's own stream, in order (empty if there is no such run)."""
        from ledger.core.workflows.events import WorkflowEvent

        records = self.store.history(run_id)
        if records and not isinstance(records[0].event, WorkflowEvent):
            return []
        return records

    def workflow_steps(self, run_id: UUID) -> list[StepView]:
        """A run's steps in order, each with its job's progress (running, attempt, retries)."""
        from ledger.store import workflow_reads

        return workflow_reads.step_views(self.store, run_id)

    def workflows(
        self,
        *,
        workflow_type: str | None = None,
        status: str | None = None,
        org: str | None = None,
        limit: int = 50,
        cursor: str | None = None,
    ) -> RunPage:
        """Runs in submit order, filtered, a page at a time (``cursor``: the previous
        page's ``next_cursor``)."""
        from ledger.store import workflow_reads

        return workflow_reads.run_page(
            self.store,
            workflow_type=workflow_type,
            status=status,
            org=org,
            limit=limit,
            cursor=cursor,
        )

    def workflow_timeline(self, run_id: UUID) -> list[TimelineEntry]:
        """Every event of a run's stream and of its steps' jobs' streams in the log's order,
        read in one snapshot (empty: no such run)."""
        from ledger.api.workflow_views import TimelineEntry
        from ledger.core.workflows.events import WorkflowEvent, WorkflowStepReleased

        with self.store.read_snapshot() as tables:
            run_records = tables.histories([run_id])[run_id]
            if not run_records or not isinstance(run_records[0].event, WorkflowEvent):
                return []
            step_of_job = {
                record.event.job_id: record.event.step_key
                for record in run_records
                if isinstance(record.event, WorkflowStepReleased) and record.event.job_id
            }
            records = tables.in_log_order([run_id, *step_of_job])
        return [TimelineEntry(step_of_job.get(record.originator_id), record) for record in records]

    def workflow_graph(self, run_id: UUID) -> WorkflowGraph | None:
        """A run's steps with their statuses and its dependencies (``None``: no such run)."""
        from ledger.api.workflow_views import graph_of

        records = self.workflow_history(run_id)
        if not records:
            return None
        return graph_of(self.workflow_steps(run_id), records)

    # --- API tokens (ledger/core/tokens.py) ------------------------------------------------

    def tokens(self) -> list[TokenState]:
        """Every API token, revoked ones too, oldest first (hashes only: no secret is kept)."""
        return self.store.tokens()

    def token(self, token_id: UUID) -> TokenState | None:
        """One API token by its id, revoked or not (``None``: no such token)."""
        return self.store.token(token_id)

    def authenticate(self, presented: str) -> TokenState | None:
        """The active token a bearer text is (``None``: unknown, revoked or wrong secret),
        compared in constant time on the secret's hash."""
        from ledger.api import tokens

        return tokens.authenticate(self.store, presented)

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
        from ledger.api import blocking, limit_reads

        state = job if isinstance(job, JobState) else self.get(job)
        if state is None or state.status is not JobStatus.PENDING:
            return []
        at = now or self.clock.now()
        found = blocking.blockers_of(state, blocking.read_facts(self.store, at), at)
        return found + limit_reads.blockers(self.store, state)

    def held_back(self, now: datetime | None = None) -> list[blocking.HeldBack]:
        """What holds back pending jobs at ``now`` (the clock's by default): paused queues,
        rate keys without a token, circuit breakers open in live pools, disabled types."""
        from ledger.api import blocking

        return blocking.held_back(self.store, now or self.clock.now())

    def queues(self) -> list[QueueSummary]:
        """Every queue with live jobs or a pause history, by name: pending and leased counts
        and whether (by whom, why) it is paused."""
        from ledger.api.queues import queue_summaries

        return queue_summaries(self.store)

    def rate_buckets(self) -> list[RateBucket]:
        """Every rate-limit key's token bucket (the rate-bucket view)."""
        return self.store.rate_buckets()

    def pools(self) -> list[PoolReport]:
        """Every worker pool's latest report of itself, by id (stale ones included)."""
        from ledger.api.pools import read_pools

        return read_pools(self.store)

    def health(self, now: datetime | None = None) -> LedgerHealth:
        """``ok``, or ``degraded`` with the reasons (no live pool, a stale pool counted dead,
        a pool reporting itself degraded), judged at ``now`` (the clock's by default)."""
        from ledger.api.pools import assess_pools

        return assess_pools(self.pools(), now or self.clock.now())

    def projection_lags(self) -> dict[str, int]:
        """Per tracked projection, how many events of the history it has yet to apply."""
        from projections.rules.catalog import TRACKED

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
