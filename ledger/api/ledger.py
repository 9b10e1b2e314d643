"""The ledger's Python API: :class:`Ledger`, the reads and the job commands over one
database, and the feature namespaces it hands out.

The class is layered: :class:`~ledger.api.reader.Reader` (the job reads, the views' reads),
then :class:`~ledger.api.worker_commands.WorkerCommands` (the claim and the lease-fenced
writes), then :class:`Ledger` (job types, enqueue, operators' commands, the reaper pass,
import, and opening/closing the store). Each feature's commands are its namespace
(``ledger.workflows``, ``ledger.schedules``, ``ledger.sources``, ``ledger.tokens``,
``ledger.retention``, ``ledger.limits``: :mod:`ledger.api.ledger_namespaces`); the methods they
replaced are deprecated aliases (:mod:`ledger.api.deprecated`). Each command is one unit of
work: read (and lock) the jobs it concerns, ask a pure decision in :mod:`ledger.core` for the
events, and :meth:`~ledger.store.unit_of_work.UnitOfWork.append` them, which folds them into
the views in the same transaction. The transactions live below, one module per kind
(:mod:`~ledger.jobs.enqueueing`, :mod:`~ledger.jobs.worker_writes`,
:mod:`~ledger.jobs.operator_writes`, :mod:`~ledger.jobs.definitions`,
:mod:`~ledger.jobs.reaping`); the classes bind them to one store, clock, jitter source and id
factory.
"""

from __future__ import annotations

import copy
import os
import random
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, Self, TypeVar
from uuid import UUID, uuid4

import msgspec

from ledger.api.deprecated import DeprecatedLedgerMethods
from ledger.api.job_handle import Enqueued, handles_of
from ledger.api.ledger_namespaces import LedgerNamespaces
from ledger.api.opening import open_ready_store
from ledger.api.worker_commands import WorkerCommands
from ledger.clock import Clock
from ledger.core import decide
from ledger.core.enqueue_plan import EnqueuePlan
from ledger.core.exchange import FileEnd
from ledger.core.reaping import BootReap, ReaperConfig, ReapReport
from ledger.core.requests import validate_definition
from ledger.core.state import JobState
from ledger.core.values import (
    JSON,
    BackoffPolicy,
    EnqueueRequest,
    JobDefinition,
    RateLimit,
    Subject,
)
from ledger.jobs import definitions, operator_writes
from ledger.jobs.binding import LedgerBinding
from ledger.jobs.enqueueing import enqueue_batch
from ledger.jobs.finish_and_claim import TurnResult
from ledger.jobs.leases import DEFAULT_LEASE_S, LeaseLength
from ledger.jobs.outcomes import BatchResult, Completion, FailureReport, Outcome
from ledger.jobs.reaping import reap
from ledger.store.frozen_writers import FrozenWriter
from ledger.store.importer import Importer, ImportProgress, ImportReport, OpenLines
from ledger.store.store import Store

if TYPE_CHECKING:
    from asyncio import AbstractEventLoop

    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

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


class Ledger(DeprecatedLedgerMethods, LedgerNamespaces, WorkerCommands):
    """An open ledger: the reads, a worker's writes (:class:`WorkerCommands`), the producers'
    and operators' job commands, and each feature's namespace (``ledger.workflows``...).
    Thread-safe: every call is its own transaction on a pooled connection."""

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
        joined.store = self.store.joining(connection, loop=loop)
        return joined

    # --- the feature namespaces (ledger/api/ledger_namespaces.py) ----------------------------

    def _binding(self) -> LedgerBinding:
        """What this ledger's feature namespaces are bound to: its store, clock and options,
        and its own enqueue and define (a subclass's, inline mode's, count for them too)."""
        return LedgerBinding(
            store=self.store,
            clock=self.clock,
            auto_define=self.auto_define,
            new_id=self._new_id,
            enqueue=self.enqueue_outcomes,
            define=self.define,
        )

    # --- operators, the reaper and imports ----------------------------------------------------

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
        fails (see :mod:`ledger.jobs.reaping`). ``now``: the pass's time (the clock's by
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
        verify_key: Ed25519PublicKey | str | os.PathLike[str] | None = None,
    ) -> ImportReport:
        """Load an exchange file (``open_lines()`` opens it again for each pass): validate it
        all (its trailer included), refuse it all on a conflicting stream, skip streams
        already here identically, append the rest through the unit of work, then catch the
        audit view up. ``validated``: the file was validated already (what
        ``Importer.validate`` returned). A target holding pending or leased jobs is refused
        unless ``into_live``; a version-1 file (no trailer) unless ``allow_untrailed``; with
        ``verify_key`` (a public key or a PEM file's path), any file not sealed by that key
        (``import.signature``: docs/integrity.md, "Exports")."""
        from ledger.integrity.keys import public_key_of

        key = public_key_of(verify_key)
        importer = Importer(self.store, allow_untrailed=allow_untrailed, verify_key=key)
        report = importer.import_file(
            open_lines, progress, validated=validated, into_live=into_live
        )
        self.catch_up(["audit"])
        return report


def _unset_if_none(value: _Limit | None) -> _Limit | msgspec.UnsetType:
    """A definition's optional field as stored: ``UNSET`` (left out), never ``None``."""
    return msgspec.UNSET if value is None else value
