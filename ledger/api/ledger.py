"""The ledger's Python API: commands and queries over one database.

Each command is one unit of work: read (and lock) the jobs it concerns, ask a pure decision in
:mod:`ledger.core.decide` for the events, and :meth:`~ledger.store.base.UnitOfWork.append` them,
which
folds them into the views in the same transaction. Worker writes are fenced by a
:class:`~ledger.core.state.Lease`: a single-job write whose fence fails raises
:class:`~ledger.core.errors.LeaseOwnerMismatchError`; a batch write reports it per job in
:class:`BatchResult`. Either way nothing is appended for that job.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from datetime import datetime
from types import TracebackType
from typing import Self
from uuid import UUID, uuid4

import msgspec

from ledger.api.migrate import migrate
from ledger.api.migrate import plan as migration_plan
from ledger.clock import Clock, SystemClock
from ledger.core import decide
from ledger.core.codec import Record
from ledger.core.decision_replay import JobReplay
from ledger.core.errors import (
    DefinitionNotFoundError,
    IdempotencyConflictError,
    InvalidRequestError,
    JobNotFoundError,
    LedgerError,
)
from ledger.core.events import (
    JSON,
    BackoffPolicy,
    EnqueueRequest,
    Event,
    Failure,
    JobDefinition,
    JobEvent,
    JobStatus,
    JobTypeDefined,
    JobTypeUpdated,
    Subject,
)
from ledger.core.exchange import Selection
from ledger.core.sources import Listing, SourceDecision, SourceSync, SyncJob, diff_source
from ledger.core.state import JobState, Lease, evolve, fold
from ledger.store import replay_reads
from ledger.store.audit_reads import read_page
from ledger.store.base import Store, UnitOfWork
from ledger.store.config import open_store
from ledger.store.exporter import Exporter, ExportProgress, ExportReport, Write
from ledger.store.importer import Importer, ImportProgress, ImportReport, OpenLines
from ledger.store.job_views import jobs_at, list_jobs
from ledger.store.tail import HistoryFollower
from projections.rules.audit_query import AuditPage, AuditQuery
from projections.rules.catalog import tracked
from projections.rules.dead_letters import DeadLetter
from projections.rules.job_list import DEFAULT_LIMIT, JobPage, job_query
from projections.rules.sync_state import SyncState
from projections.runners.rebuilder import Progress, Rebuilder, resolve
from projections.runners.stats import Stats, collect
from projections.runners.tracked import CatchUp, TrackedRunner

DEFAULT_LEASE_S = 30.0
DEFAULT_REAPER_RETRY_DELAY_S = 60.0

Decision = Callable[[JobState, datetime], Sequence[JobEvent] | JobEvent]

LeaseLength = float | Mapping[str, float]
"""A lease length in seconds, for every job type or per job type (others get the default)."""


def lease_for(lease_s: LeaseLength, job_type: str) -> float:
    if isinstance(lease_s, Mapping):
        return float(lease_s.get(job_type, DEFAULT_LEASE_S))
    return lease_s


class Completion(msgspec.Struct, frozen=True):
    """One successful attempt to record in :meth:`Ledger.succeed_many`."""

    lease: Lease
    output: JSON | None = None
    revision: str | None = None
    content_hash: str | None = None


class FailureReport(msgspec.Struct, frozen=True):
    """One failed attempt to record in :meth:`Ledger.finish_many`."""

    lease: Lease
    failure: Failure
    not_before: datetime | None = None


Outcome = Completion | FailureReport


class BatchResult(msgspec.Struct):
    """What a batch write did: the new states it recorded and, per job, why it refused."""

    accepted: list[JobState]
    rejected: dict[UUID, LedgerError]


def _as_list(events: Sequence[JobEvent] | JobEvent) -> list[JobEvent]:
    return [events] if isinstance(events, JobEvent) else list(events)


class Ledger:
    """An open ledger. Thread-safe: every call is its own transaction on a pooled connection."""

    def __init__(
        self,
        store: Store,
        *,
        clock: Clock | None = None,
        auto_define: bool = False,
        jitter: Callable[[], float] = random.random,
        new_id: Callable[[], UUID] = uuid4,
    ) -> None:
        self.store = store
        self.clock: Clock = clock or SystemClock()
        self.auto_define = auto_define
        self.created = False
        """Whether :meth:`open` with ``create`` had to create the tables."""
        self.rebuilt: list[str] = []
        """The stale projections :meth:`open` with ``create`` rebuilt."""
        self._jitter = jitter
        self._new_id = new_id

    @classmethod
    def open(
        cls,
        url: str | None = None,
        *,
        create: bool = False,
        clock: Clock | None = None,
        auto_define: bool = False,
        pool_size: int | None = None,
    ) -> Self:
        """Open the ledger at ``url`` (see :mod:`ledger.store.config`).

        With ``create`` the tables are created if missing (what ``jobledger init`` does);
        without it a database that has no ledger is refused with a clear error.
        ``auto_define`` makes enqueue define unknown job types with the defaults.
        """
        store = open_store(url, pool_size=pool_size, create=create)
        try:
            created, rebuilt = False, []
            if not create:
                store.check_initialised()
            elif store.schema_state()[1] is None:
                created = store.initialise()
                Rebuilder(store).refresh()  # records each projection's version
            elif migration_plan(store).empty:
                # Up to date: no DDL (it would take table locks under running workers); only
                # record the versions of projections that have none.
                Rebuilder(store).refresh()
            else:
                # What `jobledger migrate` does (stale views rebuilt, logged; then what is
                # missing created — in that order, see ledger.api.migrate).
                migrated = migrate(store)
                created, rebuilt = bool(migrated.created_tables), migrated.rebuilt
        except BaseException:
            store.close()
            raise
        opened = cls(store, clock=clock, auto_define=auto_define)
        opened.created = created
        opened.rebuilt = rebuilt
        return opened

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

    # --- job types --------------------------------------------------------------------------

    def define(
        self,
        job_type: str,
        *,
        version: int = 1,
        max_attempts: int = 8,
        default_timeout_s: float = 900.0,
        default_priority: int = 100,
        enabled: bool = True,
        backoff: BackoffPolicy | None = None,
    ) -> JobDefinition:
        """Define a job type, or update it. Re-defining it identically appends nothing."""
        definition = JobDefinition(
            job_type=job_type,
            version=version,
            max_attempts=max_attempts,
            default_timeout_s=float(default_timeout_s),
            default_priority=default_priority,
            enabled=enabled,
            backoff=backoff or BackoffPolicy(),
        )
        return self._put_definition(decide.validate_definition(definition))

    def set_enabled(self, job_type: str, enabled: bool) -> JobDefinition:
        """Enable or disable a job type; enqueue of a disabled type fails."""
        with self.store.unit_of_work() as uow:
            uow.serialise_appends()  # read the definition we change only once no one else can
            current = uow.definitions([job_type]).get(job_type)
            if current is None:
                raise DefinitionNotFoundError(f"job type {job_type!r} is not defined")
            changed = msgspec.structs.replace(current.definition, enabled=enabled)
            self._record_definition(uow, changed)
            return changed

    def _put_definition(self, definition: JobDefinition) -> JobDefinition:
        with self.store.unit_of_work() as uow:
            self._record_definition(uow, definition)
        return definition

    def _record_definition(self, uow: UnitOfWork, definition: JobDefinition) -> None:
        # Serialise first: two processes defining one type at once would otherwise both
        # decide "defined" and collide on the stream's first version.
        uow.serialise_appends()
        current = uow.definitions([definition.job_type]).get(definition.job_type)
        now = self.clock.now()
        event: Event
        if current is None:
            event = JobTypeDefined(at=now, definition=definition)
        elif current.definition == definition:
            return
        else:
            event = JobTypeUpdated(at=now, definition=definition)
        uow.append(definition_changes=[(definition.job_type, [event])])

    def definition(self, job_type: str) -> JobDefinition | None:
        for state in self.store.all_definitions():
            if state.definition.job_type == job_type:
                return state.definition
        return None

    def definitions(self) -> list[JobDefinition]:
        return [state.definition for state in self.store.all_definitions()]

    # --- enqueue ----------------------------------------------------------------------------

    def enqueue(
        self,
        job_type: str,
        payload: dict[str, JSON] | None = None,
        *,
        priority: int | None = None,
        run_at: datetime | None = None,
        delay_s: float | None = None,
        max_attempts: int | None = None,
        timeout_s: float | None = None,
        org: str | None = None,
        queue: str | None = None,
        idempotency_key: str | None = None,
        subject: Subject | None = None,
    ) -> UUID | None:
        """Enqueue one job; returns its id, the existing id for an idempotent repeat, or
        ``None`` when its sync subject already has a live job."""
        request = EnqueueRequest(
            job_type=job_type,
            payload=payload if payload is not None else {},
            priority=priority,
            run_at=run_at,
            delay_s=delay_s,
            max_attempts=max_attempts,
            timeout_s=timeout_s,
            org=org,
            queue=queue,
            idempotency_key=idempotency_key,
            subject=subject,
        )
        return self.enqueue_many([request])[0]

    def enqueue_many(self, requests: Sequence[EnqueueRequest]) -> list[UUID | None]:
        """Enqueue many jobs in one transaction: all are accepted, or none (on any error).

        Each result is as :meth:`enqueue` returns. Repeats within the batch follow the same
        idempotency and live-subject rules as repeats across batches.
        """
        normalised = [decide.normalise_request(request) for request in requests]
        if not normalised:
            return []
        results: list[UUID | None] = []
        with self.store.unit_of_work() as uow:
            if self.auto_define or any(r.idempotency_key or r.subject for r in normalised):
                # What decides this batch (keys, live subjects, definitions to create) must
                # not change before it commits.
                uow.serialise_appends()
            now = self.clock.now()
            types = sorted({r.job_type for r in normalised})
            definitions = {t: s.definition for t, s in uow.definitions(types).items()}
            definition_changes: list[tuple[str, Sequence[Event]]] = []
            if self.auto_define:
                for job_type in types:
                    if job_type not in definitions:
                        definitions[job_type] = JobDefinition(job_type=job_type)
                        defined = JobTypeDefined(at=now, definition=definitions[job_type])
                        definition_changes.append((job_type, [defined]))

            keyed: dict[tuple[str, str, str], tuple[UUID, EnqueueRequest]] = {}
            live_subjects: set[tuple[str, str]] = set()
            changes: list[tuple[UUID, Sequence[JobEvent]]] = []
            for request in normalised:
                if request.idempotency_key is not None:
                    key = (request.job_type, request.org or "", request.idempotency_key)
                    existing = keyed.get(key)
                    if existing is None:
                        found = uow.find_idempotent(*key)
                        if found is not None:
                            existing = (found.job_id, found.request)
                    if existing is not None:
                        if not decide.same_request(existing[1], request):
                            raise IdempotencyConflictError(
                                f"idempotency key {request.idempotency_key!r} already names job "
                                f"{existing[0]} with different requested fields",
                                existing[0],
                            )
                        results.append(existing[0])
                        continue
                if request.subject is not None:
                    where = (request.subject.source_id, request.subject.uri)
                    if where in live_subjects or uow.find_live_subject(*where) is not None:
                        results.append(None)
                        continue
                    live_subjects.add(where)
                job_id = self._new_id()
                event = decide.decide_enqueue(
                    job_id, request, definitions.get(request.job_type), now
                )
                if request.idempotency_key is not None:
                    keyed[(request.job_type, request.org or "", request.idempotency_key)] = (
                        job_id,
                        request,
                    )
                changes.append((job_id, [event]))
                results.append(job_id)
            uow.append(changes, definition_changes)
        return results

    # --- worker writes ----------------------------------------------------------------------

    def claim(
        self,
        worker_id: str,
        *,
        limit: int = 1,
        types: Sequence[str] | None = None,
        lease_s: LeaseLength = DEFAULT_LEASE_S,
    ) -> list[JobState]:
        """Lease up to ``limit`` due pending jobs, in claim order, to ``worker_id``.

        ``types=None`` claims any type; an empty ``types`` claims nothing. ``lease_s`` may
        map job types to their own lease lengths.
        """
        if not worker_id:
            raise InvalidRequestError("worker_id must be a non-empty string")
        lengths = lease_s.values() if isinstance(lease_s, Mapping) else [lease_s]
        if limit < 1 or any(length <= 0 for length in lengths):
            raise InvalidRequestError("claim needs limit >= 1 and lease lengths > 0")
        if types is not None and not types:
            return []
        with self.store.unit_of_work() as uow:
            due = uow.claimable(self.clock.now(), types, limit)
            if not due:
                return []
            # Stamp the events with a second reading, taken once the rows are ours: an event
            # another writer committed before we saw the row was stamped earlier than this.
            now = self.clock.now()
            changes = [
                (
                    state.job_id,
                    [
                        decide.decide_lease(
                            state, worker_id, lease_for(lease_s, state.job_type), now
                        )
                    ],
                )
                for state in due
            ]
            leased = uow.append(changes)
        return [leased[state.job_id] for state in due]

    def _fenced(self, job_id: UUID, decision: Decision) -> JobState:
        with self.store.unit_of_work() as uow:
            state = uow.lock_jobs([job_id]).get(job_id)
            # Read the clock only once the row is locked, so one job's events are stamped
            # in the order they are appended.
            now = self.clock.now()
            if state is None:
                raise JobNotFoundError(f"no job {job_id}")
            events = _as_list(decision(state, now))
            if not events:
                return state
            return uow.append([(job_id, events)])[job_id]

    def _fenced_many(self, items: Sequence[tuple[UUID, Decision]]) -> BatchResult:
        rejected: dict[UUID, LedgerError] = {}
        with self.store.unit_of_work() as uow:
            ids = [job_id for job_id, _ in items]
            current: dict[UUID, JobState] = uow.lock_jobs(ids)
            repeated = {job_id for job_id, count in Counter(ids).items() if count > 1}
            now = self.clock.now()
            changes: list[tuple[UUID, Sequence[JobEvent]]] = []
            for job_id, decision in items:
                state = current.get(job_id)
                if state is None:
                    rejected[job_id] = JobNotFoundError(f"no job {job_id}")
                    continue
                try:
                    events = _as_list(decision(state, now))
                except LedgerError as error:
                    rejected[job_id] = error
                    continue
                if job_id in repeated:
                    # A later item for the same job must see this one's effect.
                    current[job_id] = fold(events, state) or state
                changes.append((job_id, events))
            new_states = uow.append(changes)
        return BatchResult(accepted=list(new_states.values()), rejected=rejected)

    def heartbeat(self, lease: Lease, *, lease_s: LeaseLength = DEFAULT_LEASE_S) -> JobState:
        """Renew a lease until now + ``lease_s``."""
        return self._fenced(lease.job_id, _heartbeat_decision(lease, lease_s))

    def heartbeat_many(
        self, leases: Iterable[Lease], *, lease_s: LeaseLength = DEFAULT_LEASE_S
    ) -> BatchResult:
        """Renew many leases in one transaction (each still its own heartbeat event)."""
        return self._fenced_many(
            [(lease.job_id, _heartbeat_decision(lease, lease_s)) for lease in leases]
        )

    def progress(
        self,
        lease: Lease,
        *,
        stage: str | None = None,
        done: int | None = None,
        total: int | None = None,
        checkpoint: JSON | None = None,
    ) -> JobState:
        """Report a stage, progress counts and/or a checkpoint. Does not extend the lease."""
        return self._fenced(
            lease.job_id,
            lambda s, now: decide.decide_progress(
                s, lease, now, stage=stage, done=done, total=total, checkpoint=checkpoint
            ),
        )

    def succeed(
        self,
        lease: Lease,
        *,
        output: JSON | None = None,
        revision: str | None = None,
        content_hash: str | None = None,
    ) -> JobState:
        """Record success; ``revision``/``content_hash`` describe the *result* (sync state)."""
        completion = Completion(lease, output, revision, content_hash)
        return self._fenced(lease.job_id, _completion_decision(completion))

    def succeed_many(self, completions: Sequence[Completion]) -> BatchResult:
        """Record many successes in one transaction."""
        return self._fenced_many([(c.lease.job_id, _completion_decision(c)) for c in completions])

    def fail(
        self, lease: Lease, failure: Failure, *, not_before: datetime | None = None
    ) -> JobState:
        """Record a failed attempt; the job is retried with backoff or dead-lettered."""
        report = FailureReport(lease, failure, not_before)
        return self._fenced(lease.job_id, self._outcome_decision(report))

    def finish_many(self, outcomes: Sequence[Outcome]) -> BatchResult:
        """Record many successes and failures in one transaction (the batch completer's
        write). Outcomes whose fence fails are reported in ``rejected``, nothing appended."""
        return self._fenced_many([(o.lease.job_id, self._outcome_decision(o)) for o in outcomes])

    def _outcome_decision(self, outcome: Outcome) -> Decision:
        if isinstance(outcome, Completion):
            return _completion_decision(outcome)
        draw = self._jitter()
        return lambda state, now: decide.decide_fail(
            state,
            outcome.lease,
            now,
            outcome.failure,
            jitter_draw=draw,
            not_before=outcome.not_before,
        )

    def release(self, lease: Lease, *, reason: str = "released by worker") -> JobState:
        """Hand the job back at once without consuming the attempt (shutdown, cancellation)."""
        return self._fenced(
            lease.job_id, lambda s, now: decide.decide_release(s, lease, now, reason)
        )

    # --- operators and the reaper -----------------------------------------------------------

    def cancel(self, job_id: UUID, *, reason: str = "cancelled by operator") -> JobState:
        """Cancel a pending or leased job."""
        return self._fenced(job_id, lambda s, now: decide.decide_cancel(s, now, reason))

    def requeue(self, job_id: UUID, *, reason: str = "requeued by operator") -> JobState:
        """Start a new run of a dead or cancelled job (refused while its sync subject has
        another live job: at most one live job per subject)."""
        with self.store.unit_of_work() as uow:
            state = uow.lock_jobs([job_id]).get(job_id)
            if state is None:
                raise JobNotFoundError(f"no job {job_id}")
            live = None
            if state.subject is not None:
                uow.serialise_appends()  # the live-subject answer must hold until commit
                live = uow.find_live_subject(state.subject.source_id, state.subject.uri)
            now = self.clock.now()
            event = decide.decide_requeue(
                state, now, reason, live_subject_job=live.job_id if live else None
            )
            return uow.append([(job_id, [event])])[job_id]

    def reap_expired(
        self, *, limit: int = 500, retry_delay_s: float = DEFAULT_REAPER_RETRY_DELAY_S
    ) -> list[JobState]:
        """One reaper pass (see :class:`ledger.maintenance.reaper.Reaper`); the reaped jobs' new
        states."""
        from ledger.maintenance.reaper import (  # the reaper builds on this class
            Reaper,
            ReaperConfig,
        )

        report = Reaper(self, ReaperConfig(limit=limit, retry_delay_s=retry_delay_s)).run_once()
        states = self.get_many([reaped.job_id for reaped in report.reaped])
        return [states[r.job_id] for r in report.reaped if r.job_id in states]

    def release_claims_with_prefix(
        self, prefix: str, *, alive: Callable[[str], bool], reason: str = "released by boot reap"
    ) -> list[JobState]:
        """Release jobs leased by workers whose id starts with ``prefix`` and for which
        ``alive(worker_id)`` is false: the claims a crashed process of this pool left."""
        with self.store.unit_of_work() as uow:
            held = [
                s
                for s in uow.leased_by_prefix(prefix)
                if s.worker_id is not None and not alive(s.worker_id)
            ]
            now = self.clock.now()
            changes = [(s.job_id, [decide.decide_release_stale(s, now, reason)]) for s in held]
            released = uow.append(changes)
        return [released[s.job_id] for s in held]

    # --- reads ------------------------------------------------------------------------------

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
        state: JobState | None = None
        for record in self.history(job_id):
            event = record.event
            assert isinstance(event, JobEvent)
            if version is not None and record.originator_version > version:
                break
            if at is not None and event.at > at:
                break
            state = evolve(state, event)
        return state

    def counts(self) -> dict[str, int]:
        """Jobs per status."""
        return self.store.count_by_status()

    def sync_state(self, source_id: str) -> list[SyncState]:
        """The sync-state rows of one source."""
        return self.store.sync_state(source_id)

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

    def sync_source(
        self, source_id: str, listing: Listing, *, job_type: str, org: str | None = None
    ) -> SourceSync:
        """Diff a complete listing of source ``source_id`` against its sync state (see
        :func:`ledger.core.sources.diff_source`) and enqueue a ``job_type`` job per upsert and
        delete, in one :meth:`enqueue_many` transaction (all or none).

        Upsert subjects carry the listing's revision; payloads are empty (the subject says
        what to do). A change whose subject already has a live job is not enqueued but
        reported in ``skipped``: that job will settle the URI, and the next poll decides
        again. The sync state is read once, before the enqueue: a job that succeeds in
        between can at worst cause a redundant job, and the next poll sees what it hid.
        """
        rows = self.store.sync_state(source_id)  # one read: snapshot and known URIs agree
        diff = diff_source(
            source_id,
            listing,
            snapshot={row.uri: row.revision for row in rows if row.revision is not None},
            known={row.uri for row in rows},
        )
        changes = diff.changes
        requests = [
            EnqueueRequest(job_type=job_type, org=org, subject=decision.subject(source_id))
            for decision in changes
        ]
        enqueued: list[SyncJob] = []
        skipped: list[SourceDecision] = []
        for decision, job_id in zip(changes, self.enqueue_many(requests), strict=True):
            if job_id is None:
                skipped.append(decision)
            else:
                enqueued.append(SyncJob(decision, job_id))
        return SourceSync(diff, enqueued, skipped)

    def dead_letters(self, job_type: str | None = None) -> list[DeadLetter]:
        """Dead jobs (optionally of one type), oldest death first."""
        return self.store.dead_letters(job_type)

    def projections(self, *, progress: Progress | None = None) -> Rebuilder:
        """Rebuild, verify and status of the views (see :mod:`projections.runners.rebuilder`);
        ``progress(phase, done, total)`` is called as the work advances."""
        return Rebuilder(self.store, progress=progress)

    def catch_up(self, names: Sequence[str] | None = None) -> list[CatchUp]:
        """Run the tracked projections named (all by default) to the head of the history."""
        return [TrackedRunner(self.store, p).catch_up() for p in tracked(resolve(names))]

    def stats(self, now: datetime | None = None, *, catch_up: bool = True) -> Stats:
        """Counts, throughput windows, oldest due job and run times at ``now`` (the clock's
        by default); with ``catch_up`` the audit view is first brought to the head."""
        if catch_up:
            self.catch_up(["audit"])
        return collect(self.store, now or self.clock.now())

    # --- decision replay (jobledger replay --check; see ledger/core/decision_replay.py) ---------

    def replay_check(self, job_id: UUID) -> JobReplay:
        """Re-run the current decisions over one job's history and report what differs."""
        return replay_reads.check_job(self.store, job_id)

    def replay_check_all(
        self, *, job_type: str | None = None, batch_size: int = 500
    ) -> Iterator[JobReplay]:
        """:meth:`replay_check` for every job (or every job of ``job_type``), streamed from one
        read snapshot, ``batch_size`` jobs at a time (see :mod:`ledger.store.replay_reads`)."""
        return replay_reads.check_all(self.store, job_type=job_type, batch_size=batch_size)

    # --- job views --------------------------------------------------------------------------

    def jobs(
        self,
        *,
        statuses: Iterable[JobStatus] = (),
        job_type: str | None = None,
        org: str | None = None,
        limit: int = DEFAULT_LIMIT,
        cursor: int | None = None,
    ) -> JobPage:
        """One page of the current jobs, newest enqueue first (any status if ``statuses`` is
        empty). Pass a page's ``next_cursor`` as ``cursor`` for the next one."""
        query = job_query(statuses, job_type, org, limit, cursor)
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
    ) -> JobPage:
        """:meth:`jobs` as it was at ``at``: each job folded from its history up to its first
        event later than ``at`` (as :meth:`state_at`); jobs enqueued later are absent. Reads
        the whole history in batches; ``progress(position, head)`` follows it."""
        query = job_query(statuses, job_type, org, limit, cursor)
        return jobs_at(self.store, at, query, progress=progress)

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
        return HistoryFollower(
            self.store, job_id, poll_s=poll_s, linger_s=linger_s, timeout_s=timeout_s
        )

    def audit(self, query: AuditQuery, *, catch_up: bool = True) -> AuditPage:
        """One page of audit rows (``query.cursor``: the page after a previous one) and the
        next page's cursor; with ``catch_up`` the audit view is first brought to the head, so
        the rows include every event committed before the call."""
        if catch_up:
            self.catch_up(["audit"])
        return read_page(self.store, query)

    # --- export and import (ledger/core/exchange.py, docs/export-format.md) ---------------------

    def export_history(
        self,
        write: Write,
        selection: Selection | None = None,
        *,
        progress: ExportProgress | None = None,
    ) -> ExportReport:
        """Write the whole histories of the selected jobs (all by default), after the
        definition streams they use, as exchange-format lines through ``write``; one snapshot."""
        return Exporter(self.store).export(write, selection or Selection(), progress)

    def import_history(
        self,
        open_lines: OpenLines,
        *,
        progress: ImportProgress | None = None,
        validated_lines: int | None = None,
    ) -> ImportReport:
        """Load an exchange file (``open_lines()`` opens it again for each pass): validate it
        all, refuse it all on a conflicting stream, skip streams already here identically,
        append the rest through the unit of work, then catch the audit view up.
        ``validated_lines``: the file was validated already (see ``Importer.validate``)."""
        report = Importer(self.store).import_file(
            open_lines, progress, validated_lines=validated_lines
        )
        self.catch_up(["audit"])
        return report

    def on_jobs_available(self, listener: Callable[[], None]) -> None:
        """Call ``listener()`` after this process commits work that may be claimable."""
        self.store.add_listener(listener)

    def remove_listener(self, listener: Callable[[], None]) -> None:
        self.store.remove_listener(listener)


def _heartbeat_decision(lease: Lease, lease_s: LeaseLength) -> Decision:
    return lambda state, now: decide.decide_heartbeat(
        state, lease, lease_for(lease_s, state.job_type), now
    )


def _completion_decision(completion: Completion) -> Decision:
    return lambda state, now: decide.decide_succeed(
        state,
        completion.lease,
        now,
        output=completion.output,
        revision=completion.revision,
        content_hash=completion.content_hash,
    )
