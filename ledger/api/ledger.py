"""The ledger's Python API: :class:`Ledger`, the reads and every command over one database.

The class is layered: :class:`~ledger.api.reader.Reader` (every read), then
:class:`~ledger.api.worker_commands.WorkerCommands` (the claim and the lease-fenced writes),
then :class:`Ledger` (job types, enqueue, source sync, operators' commands, the reaper pass,
import, and opening/closing the store). Each command is one unit of work: read (and lock) the
jobs it concerns, ask a pure decision in :mod:`ledger.core` for the events, and
:meth:`~ledger.store.unit_of_work.UnitOfWork.append` them, which folds them into the views in the
same
transaction. The transactions live beside the classes, one module per kind
(:mod:`~ledger.api.enqueueing`, :mod:`~ledger.api.worker_writes`,
:mod:`~ledger.api.operator_writes`, :mod:`~ledger.api.definitions`, :mod:`~ledger.api.reaping`);
the classes bind them to one store, clock, jitter source and id factory.
"""

from __future__ import annotations

import copy
import random
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, Self, TypeVar
from uuid import UUID, uuid4

import msgspec

from ledger.api import (
    definitions,
    operator_writes,
    queues,
    schedules,
    source_polls,
    tokens,
    workflows,
)
from ledger.api.enqueueing import enqueue_batch, sync_listing
from ledger.api.job_handle import Enqueued, handles_of
from ledger.api.leases import DEFAULT_LEASE_S, LeaseLength
from ledger.api.opening import open_ready_store
from ledger.api.outcomes import BatchResult, Completion, FailureReport, Outcome
from ledger.api.reaping import reap
from ledger.api.schedule_firing import DEFAULT_SCHEDULES_PER_PASS, FireReport, fire_due
from ledger.api.turns import TurnResult
from ledger.api.worker_commands import WorkerCommands
from ledger.api.workflow_handle import WorkflowHandle
from ledger.api.workflows import WorkflowStarted
from ledger.clock import Clock
from ledger.core import decide
from ledger.core.enqueue_plan import EnqueuePlan
from ledger.core.errors import InvalidRequestError
from ledger.core.exchange import FileEnd
from ledger.core.queues import QueueState
from ledger.core.reaping import BootReap, ReaperConfig, ReapReport
from ledger.core.requests import validate_definition
from ledger.core.schedules.catch_up import PassBounds
from ledger.core.schedules.state import ScheduleState
from ledger.core.source_polls.decide import (
    POLL_JOB_MAX_ATTEMPTS,
    POLL_JOB_TIMEOUT_S,
    SourceConfig,
    SourcePoll,
)
from ledger.core.source_polls.events import SOURCE_POLL_JOB_TYPE
from ledger.core.sources import Listing, SourceSync
from ledger.core.state import JobState
from ledger.core.tokens import TokenState
from ledger.core.values import (
    JSON,
    BackoffPolicy,
    EnqueueRequest,
    JobDefinition,
    RateLimit,
    Subject,
)
from ledger.core.workflows.spec import StepRequest, WorkflowRequest
from ledger.core.workflows.state import RunState
from ledger.store.frozen_writers import FrozenWriter
from ledger.store.importer import Importer, ImportProgress, ImportReport, OpenLines
from ledger.store.store import Store

if TYPE_CHECKING:
    from asyncio import AbstractEventLoop

__all__ = [  # the outcome and lease types are imported from here by the runtime
    "DEFAULT_LEASE_S",
    "BatchResult",
    "Completion",
    "FailureReport",
    "LeaseLength",
    "Ledger",
    "Outcome",
    "TurnResult",
]

_Limit = TypeVar("_Limit", int, str)


class Ledger(WorkerCommands):
    """An open ledger: the reads, a worker's writes (:class:`WorkerCommands`) and the
    producers' and operators' commands. Thread-safe: every call is its own transaction on a
    pooled connection."""

    def __init__(
        self,
        store: Store,
        *,
        clock: Clock | None = None,
        auto_define: bool = False,
        jitter: Callable[[], float] = random.random,
        new_id: Callable[[], UUID] = uuid4,
    ) -> None:
        super().__init__(store, clock=clock, jitter=jitter)
        self.auto_define = auto_define
        self.created = False
        """Whether :meth:`open` with ``create`` had to create the tables."""
        self.rebuilt: list[str] = []
        """The projections :meth:`open` with ``create`` rebuilt: the stale ones, then those
        whose tables it had to create under an existing history."""
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
        idle_in_transaction_s: float | None = None,
    ) -> Self:
        """Open the ledger at ``url`` (see :mod:`ledger.store.config`).

        With ``create`` the tables are created if missing (what ``jobledger init`` does), stale
        projections rebuilt, and a projection whose table had to be created rebuilt from the
        history; without it a database that has no ledger is refused with a
        clear error (see :mod:`ledger.api.opening`). ``auto_define`` makes enqueue define
        unknown job types with the defaults. ``idle_in_transaction_s`` (PostgreSQL): a session
        idle that long inside a transaction is ended by the server, releasing its locks —
        workers pass a short one (see ``worker_idle_timeout``), so a frozen process cannot
        hold the events table's lock for long.
        """
        ready = open_ready_store(
            url, create=create, pool_size=pool_size, idle_in_transaction_s=idle_in_transaction_s
        )
        opened = cls(ready.store, clock=clock, auto_define=auto_define)
        opened.created = ready.created
        opened.rebuilt = [*ready.rebuilt, *(refill.name for refill in ready.refilled)]
        return opened

    # --- job types ----------------------------------------------------------------------------

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
        concurrency: int | None = None,
        per_org_concurrency: int | None = None,
        resource: str | None = None,
        resource_limit: int | None = None,
        rate: RateLimit | None = None,
    ) -> JobDefinition:
        """Define a job type, or update it. Re-defining it identically appends nothing.

        ``concurrency``: at most this many of its jobs leased at once, across every process;
        ``per_org_concurrency``: the same per org; ``resource`` with ``resource_limit``: at
        most that many leased at once of all the types naming the resource (``None``: no
        such limit; docs/operations.md, "Concurrency limits"). ``rate`` limits how many of
        its jobs may start per period across every process
        (:func:`ledger.core.rates.parse_rate` reads ``"10/1m"``); jobs over it stay pending.
        The definition is replaced whole: leaving a limit out removes one it had."""
        definition = JobDefinition(
            job_type=job_type,
            version=version,
            max_attempts=max_attempts,
            default_timeout_s=float(default_timeout_s),
            default_priority=default_priority,
            enabled=enabled,
            backoff=backoff or BackoffPolicy(),
            concurrency=_unset_if_none(concurrency),
            per_org_concurrency=_unset_if_none(per_org_concurrency),
            resource=_unset_if_none(resource),
            resource_limit=_unset_if_none(resource_limit),
            rate=msgspec.UNSET if rate is None else rate,
        )
        validated = validate_definition(definition)
        return definitions.put_definition(self.store, self.clock, validated)

    def pause_queue(
        self, queue: str, *, reason: str = "paused", actor: str | None = None
    ) -> QueueState | None:
        """Stop claiming ``queue``'s jobs (they stay pending; leased ones finish). A
        ``queue_paused`` event names ``actor`` and ``reason``; pausing a paused queue appends
        nothing."""
        return queues.set_paused(self.store, self.clock, queue, True, reason=reason, actor=actor)

    def resume_queue(
        self, queue: str, *, reason: str = "resumed", actor: str | None = None
    ) -> QueueState | None:
        """Claim ``queue``'s jobs again (a ``queue_resumed``; nothing if it is not paused)."""
        return queues.set_paused(self.store, self.clock, queue, False, reason=reason, actor=actor)

    def set_enabled(
        self, job_type: str, enabled: bool, *, actor: str | None = None
    ) -> JobDefinition:
        """Enable or disable a job type; enqueue of a disabled type fails. ``actor`` names
        who did it in the ``job_type_updated`` (the HTTP API's token)."""
        return definitions.set_enabled(self.store, self.clock, job_type, enabled, actor=actor)

    # --- enqueue ------------------------------------------------------------------------------

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
        actor: str | None = None,
    ) -> Enqueued[Any]:
        """Enqueue one job; the answer says what happened and is a handle on the job
        (:class:`~ledger.api.job_handle.Enqueued`): ``created``, ``existing`` (an idempotent
        repeat names the job holding the key) or ``skipped`` (its sync subject already has a
        live job: that one is named). ``actor`` names who asked in the ``job_enqueued`` (the
        HTTP API's token; ``None``: no one named)."""
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
        return self.enqueue_many([request], actor=actor)[0]

    def enqueue_many(
        self, requests: Sequence[EnqueueRequest], *, actor: str | None = None
    ) -> list[Enqueued[Any]]:
        """Enqueue many jobs in one transaction: all are accepted, or none (on any error).

        One answer per request, in order, as :meth:`enqueue` returns. Repeats within the batch
        follow the same idempotency and live-subject rules as repeats across batches
        (:mod:`ledger.core.enqueue_plan`).
        """
        return handles_of(self, self.enqueue_outcomes(requests, actor=actor))

    def enqueue_outcomes(
        self, requests: Sequence[EnqueueRequest], *, actor: str | None = None
    ) -> EnqueuePlan:
        """:meth:`enqueue_many`, answering with the plan it appended (ids, which were
        created, which a live subject skipped): what callers that build their own answers
        from it use (the HTTP API, typed jobs)."""
        return enqueue_batch(
            self.store,
            self.clock,
            requests,
            auto_define=self.auto_define,
            new_id=self._new_id,
            actor=actor,
        )

    def using(self, connection: object, *, loop: AbstractEventLoop | None = None) -> Self:
        """This ledger inside the application's transaction on ``connection``: what it
        enqueues (and every other command it runs) is written on that connection, in that
        transaction, and committed or rolled back with it; nothing is committed here
        (docs/transactions.md). Its reads see the transaction's uncommitted jobs.

        ``connection``: a ``psycopg.Connection`` to this ledger's PostgreSQL database inside
        a transaction (autocommit off, or in ``with conn.transaction():``), or a
        ``sqlite3.Connection`` to this ledger's file inside one (``BEGIN IMMEDIATE``); any
        other (autocommit outside a transaction, another database, closed) is refused with
        ``request.invalid``. Each command runs in a savepoint: an error rolls back only its
        part and is raised, never retried (a retry means running the application's whole
        transaction again). Usable as ``with ledger.using(conn) as tx:``; closing it closes
        neither the connection nor this ledger. ``loop``: the event loop a
        ``psycopg.AsyncConnection`` belongs to (what :meth:`AsyncLedger.using
        <ledger.api.async_ledger.AsyncLedger.using>` passes; this ledger must then be called
        from another thread)."""
        joined = copy.copy(self)
        joined.store = self.store.borrow(connection, loop=loop)
        return joined

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
        return sync_listing(
            self.store,
            lambda requests: self.enqueue_outcomes(requests).results,
            source_id,
            listing,
            job_type=job_type,
            org=org,
        )

    def poll_source(
        self,
        source: str,
        lister: Callable[[], Listing],
        config: SourceConfig,
        *,
        poll_job_id: UUID | None = None,
    ) -> SourcePoll:
        """Poll ``source`` once with ``lister`` (see :mod:`ledger.api.source_polls`): skipped
        while its breaker is open; else the listing diffed against the sync state and its
        changes enqueued as ``config.job_type`` jobs in the commit that appends
        ``source_polled``; a lister that raises is ``source_poll_failed`` (and, at the
        breaker's threshold, ``source_breaker_opened``). A failed poll is a result, not an
        exception: only the store's own errors raise."""
        return source_polls.poll_source(
            self.store,
            self.clock,
            source,
            lister,
            config,
            auto_define=self.auto_define,
            new_id=self._new_id,
            poll_job_id=poll_job_id,
        )

    def enqueue_source_poll(self, source: str, *, actor: str | None = None) -> UUID:
        """Enqueue one ``jobledger.source_poll`` job for ``source`` (a worker whose registry
        has its lister runs it), defining the built-in type first if it is not yet."""
        if not isinstance(source, str) or not source:
            raise InvalidRequestError("a source's name must be a non-empty string")
        if self.definition(SOURCE_POLL_JOB_TYPE) is None:
            self.define(
                SOURCE_POLL_JOB_TYPE,
                max_attempts=POLL_JOB_MAX_ATTEMPTS,
                default_timeout_s=POLL_JOB_TIMEOUT_S,
            )
        return self.enqueue(SOURCE_POLL_JOB_TYPE, {"source": source}, actor=actor).job_id

    # --- workflows ----------------------------------------------------------------------------

    def start_workflow(self, request: WorkflowRequest | Mapping[str, Any]) -> WorkflowStarted:
        """Submit a workflow run (a :class:`WorkflowRequest` or its JSON shape), releasing its
        root steps' jobs in the same commit. With an idempotency key, the same request again
        returns the same run (``created`` false); another is ``workflow.idempotency_conflict``."""
        return workflows.start(self.store, self.clock, workflows.request_of(request), self._new_id)

    def workflow(self, run_id: UUID) -> WorkflowHandle:
        """A handle on a run: its status, steps, result, and ``wait``."""
        return WorkflowHandle(self, run_id)

    def complete_step(
        self,
        run_id: UUID,
        step_key: str,
        succeeded: bool,
        output: JSON | None = None,
        reason: str = "",
    ) -> RunState:
        """Complete a waiting external step (an approval gate). The identical completion
        again changes nothing; another is ``workflow.completion_conflict``; a job step is
        ``workflow.step_not_external``; a run being released by another writer is
        ``workflow.release_conflict`` (retry)."""
        return workflows.complete_step(
            self.store,
            self.clock,
            run_id,
            step_key,
            succeeded=succeeded,
            output=output,
            reason=reason,
        )

    def cancel_workflow(self, run_id: UUID, reason: str = "cancelled by operator") -> RunState:
        """Cancel a live run: its live steps and their jobs (whose workers' later writes are
        fenced out). A cancelled run again: nothing; a finished one: refused."""
        return workflows.cancel(self.store, self.clock, run_id, reason)

    def append_steps(
        self,
        run_id: UUID,
        steps: Sequence[StepRequest | Mapping[str, Any]],
        mutation_key: str,
    ) -> RunState:
        """Add steps to a live run, idempotently per ``mutation_key``."""
        return workflows.append_steps(
            self.store, self.clock, run_id, workflows.steps_of(steps), mutation_key
        )

    def recover_workflow(
        self, run_id: UUID, from_step: str, reason: str, request_key: str
    ) -> WorkflowStarted:
        """A new run of a finished run that re-runs ``from_step`` and what follows it,
        reusing the other succeeded steps' outputs; idempotent per ``request_key``."""
        return workflows.recover(
            self.store,
            self.clock,
            run_id,
            from_step=from_step,
            reason=reason,
            request_key=request_key,
        )

    # --- cron schedules -----------------------------------------------------------------------

    def add_schedule(
        self,
        name: str,
        cron: str,
        job_type: str,
        payload: dict[str, JSON] | None = None,
        *,
        tz: str = "UTC",
        catch_up: str = "latest",
        jitter_s: float = 0.0,
        org: str | None = None,
        queue: str | None = None,
        priority: int | None = None,
        replace: bool = False,
        reason: str = "added by operator",
    ) -> ScheduleState:
        """Add a cron schedule: a ``job_type`` job with ``payload`` per slot of ``cron`` read
        in ``tz``; ``catch_up`` (``all``, ``latest``, ``none``) says what slots overdue after
        downtime do. An existing name is ``schedule.exists`` unless ``replace`` (a new
        ``schedule_added``, its slots starting afresh); a bad expression is
        ``schedule.invalid_cron``, a bad zone ``schedule.unknown_tz``, a type enqueue would
        refuse ``job.definition_not_found_or_disabled`` (``docs/schedules.md``)."""
        spec = schedules.ScheduleSpec(
            name=name,
            cron=cron,
            job_type=job_type,
            payload=payload if payload is not None else {},
            tz=tz,
            catch_up=catch_up,
            jitter_s=jitter_s,
            org=org,
            queue=queue,
            priority=priority,
        )
        return schedules.add_schedule(
            self.store,
            self.clock,
            spec,
            replace=replace,
            auto_define=self.auto_define,
            reason=reason,
        )

    def pause_schedule(self, name: str, *, reason: str = "paused by operator") -> ScheduleState:
        """Stop a schedule firing; its slots while paused are neither fired nor missed."""
        return schedules.pause_schedule(self.store, self.clock, name, reason)

    def resume_schedule(self, name: str, *, reason: str = "resumed by operator") -> ScheduleState:
        """Fire a paused schedule again, from its first slot after now."""
        return schedules.resume_schedule(self.store, self.clock, name, reason)

    def remove_schedule(self, name: str, *, reason: str = "removed by operator") -> ScheduleState:
        """Remove a schedule (its history stays; the name may be added again)."""
        return schedules.remove_schedule(self.store, self.clock, name, reason)

    def schedules(self) -> list[ScheduleState]:
        """Every schedule, removed ones too, by name."""
        return self.store.schedules()

    def schedule(self, name: str) -> ScheduleState | None:
        """One schedule (``None``: no such name)."""
        return self.store.schedule(name)

    def fire_due(
        self,
        now: datetime | None = None,
        *,
        bounds: PassBounds | None = None,
        limit: int = DEFAULT_SCHEDULES_PER_PASS,
    ) -> FireReport:
        """One scheduler pass at ``now`` (the clock's by default): each due slot of up to
        ``limit`` schedules fired (a job, keyed by the slot) or missed by its catch-up
        policy, in one transaction; safe in any number of processes at once
        (:mod:`ledger.api.schedule_firing`)."""
        return fire_due(
            self.store,
            self.clock,
            now,
            bounds=bounds or PassBounds(),
            limit=limit,
            auto_define=self.auto_define,
            new_id=self._new_id,
        )

    # --- operators, the reaper and imports ----------------------------------------------------

    def create_token(
        self, *, org: str | None, role: str, label: str | None = None
    ) -> tokens.CreatedToken:
        """A new API token (``token_created``); its bearer secret is returned once only."""
        return tokens.create_token(self.store, self.clock, org=org, role=role, label=label)

    def revoke_token(self, token_id: UUID, *, reason: str = "revoked by operator") -> TokenState:
        """Stop accepting an API token (``token_revoked``)."""
        return tokens.revoke_token(self.store, self.clock, token_id, reason)

    def cancel(self, job_id: UUID, *, reason: str = "cancelled by operator") -> JobState:
        """Cancel a pending or leased job."""
        return self._fenced(job_id, lambda s, now: decide.decide_cancel(s, now, reason))

    def cancel_many(
        self, job_ids: Sequence[UUID], *, reason: str = "cancelled by operator"
    ) -> operator_writes.CancelReport:
        """Cancel many pending or leased jobs in one transaction, each refusal (unknown job,
        finished job) reported rather than raised."""
        return operator_writes.cancel_each(self.store, self.clock, job_ids, reason)

    def requeue(self, job_id: UUID, *, reason: str = "requeued by operator") -> JobState:
        """Start a new run of a dead or cancelled job (refused while its sync subject has
        another live job: at most one live job per subject)."""
        return operator_writes.requeue(self.store, self.clock, job_id, reason)

    def reap(
        self, config: ReaperConfig | None = None, *, now: datetime | None = None
    ) -> ReapReport:
        """One reaper pass: fail the expired leases, defer (as an event) those whose reap
        fails (see :mod:`ledger.api.reaping`). ``now``: the pass's time (the clock's by
        default)."""
        return reap(self.store, self.clock, config or ReaperConfig(), now=now)

    def reap_expired(
        self,
        *,
        limit: int = ReaperConfig.limit,
        retry_delay_s: float = ReaperConfig.retry_delay_s,
    ) -> list[JobState]:
        """One reaper pass (:meth:`reap`); the reaped jobs' new states."""
        report = self.reap(ReaperConfig(limit=limit, retry_delay_s=retry_delay_s))
        states = self.get_many([reaped.job_id for reaped in report.reaped])
        return [states[r.job_id] for r in report.reaped if r.job_id in states]

    def end_frozen_writers(
        self, silent_s: float | None = None, stalled_s: float | None = None
    ) -> list[FrozenWriter]:
        """End the database sessions frozen inside a write that block other writers (their
        client silent for more than ``silent_s``: by default half the idle-in-transaction
        timeout the ledger was opened with), and a jobledger store's frozen sessions silent
        for more than ``stalled_s`` (by default twice ``silent_s``: that timeout) that block
        nobody (their row locks hide their jobs from the reaper), and report them;
        PostgreSQL only, elsewhere ``[]``
        (:meth:`Store.end_frozen_writers <ledger.store.store.Store.end_frozen_writers>`).
        The pool's watchdog runs it (:mod:`ledger.maintenance.watchdog`)."""
        return self.store.end_frozen_writers(silent_s, stalled_s)

    def boot_reap(
        self, prefix: str, *, alive: Callable[[str], bool], reason: str = "released by boot reap"
    ) -> BootReap:
        """End the claims of workers whose id starts with ``prefix`` and for which
        ``alive(worker_id)`` is false (the claims a crashed process of this pool left), in one
        transaction: a claim whose handler never started is released (``reason``; attempt not
        consumed), one whose handler had started is failed as ``worker_lost``
        (``job.worker_lost``: attempt spent, retried after the job's backoff or dead)."""
        return operator_writes.release_stale_claims(self.store, self.clock, prefix, alive, reason)

    def release_claims_with_prefix(
        self, prefix: str, *, alive: Callable[[str], bool], reason: str = "released by boot reap"
    ) -> list[JobState]:
        """:meth:`boot_reap`, and the new states of every claim it ended (released first,
        then those failed as ``worker_lost``)."""
        done = self.boot_reap(prefix, alive=alive, reason=reason)
        return [*done.released, *done.lost]

    def import_history(
        self,
        open_lines: OpenLines,
        *,
        progress: ImportProgress | None = None,
        validated: FileEnd | None = None,
        into_live: bool = False,
        allow_untrailed: bool = False,
    ) -> ImportReport:
        """Load an exchange file (``open_lines()`` opens it again for each pass): validate it
        all (its trailer included), refuse it all on a conflicting stream, skip streams
        already here identically, append the rest through the unit of work, then catch the
        audit view up. ``validated``: the file was validated already (what
        ``Importer.validate`` returned). A target holding pending or leased jobs is refused
        unless ``into_live``; a version-1 file (no trailer) unless ``allow_untrailed``."""
        importer = Importer(self.store, allow_untrailed=allow_untrailed)
        report = importer.import_file(
            open_lines, progress, validated=validated, into_live=into_live
        )
        self.catch_up(["audit"])
        return report


def _unset_if_none(value: _Limit | None) -> _Limit | msgspec.UnsetType:
    """A definition's optional field as stored: ``UNSET`` (left out), never ``None``."""
    return msgspec.UNSET if value is None else value
