"""The writes a worker makes: the claim, and the writes fenced by its lease.

:class:`WorkerCommands` is a :class:`~ledger.api.reader.Reader` with these commands;
:class:`~ledger.api.ledger.Ledger` adds the producers' and operators' commands. A single-job
write whose fence fails raises :class:`~ledger.core.errors.LeaseOwnerMismatchError`; a batch
write reports it per job in :class:`~ledger.jobs.outcomes.BatchResult`. Either way nothing is
appended for that job. The transactions are in :mod:`ledger.jobs.worker_writes`.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from uuid import UUID

from ledger.api.reader import Reader
from ledger.clock import Clock
from ledger.core import decide
from ledger.core.errors import LeaseOwnerMismatchError
from ledger.core.state import JobState, Lease
from ledger.core.values import JSON, Failure
from ledger.jobs import finish_and_claim as batch_turn
from ledger.jobs import worker_writes
from ledger.jobs.finish_and_claim import TurnResult
from ledger.jobs.leases import DEFAULT_LEASE_S, LeaseLength
from ledger.jobs.outcomes import BatchResult, Completion, FailureReport, Outcome
from ledger.store.store import Store


class WorkerCommands(Reader):
    """Reads plus a worker's writes over one store. ``jitter`` draws the backoff jitter of a
    failure (uniform in [0, 1); injectable so tests and replays are deterministic)."""

    def __init__(
        self,
        store: Store,
        *,
        clock: Clock | None = None,
        jitter: Callable[[], float] = random.random,
    ) -> None:
        super().__init__(store, clock=clock)
        self._jitter = jitter

    def claim(
        self,
        worker_id: str,
        *,
        limit: int = 1,
        types: Sequence[str] | None = None,
        lease_s: LeaseLength = DEFAULT_LEASE_S,
        queues: Sequence[str] | None = None,
        starting: int = 0,
    ) -> list[JobState]:
        """Lease up to ``limit`` due pending jobs, in claim order, to ``worker_id``.

        ``types=None`` claims any type; an empty ``types`` claims nothing. ``queues`` likewise
        (a job enqueued without a queue is in :data:`~ledger.core.events.DEFAULT_QUEUE`,
        ``"default"``). ``lease_s`` may map job types to their own lease lengths. The first
        ``starting`` jobs claimed are also recorded as started (stage ``running``, as
        :meth:`start_many` would): for a caller that runs them at once.
        """
        return worker_writes.claim(
            self.store,
            self.clock,
            worker_id,
            limit=limit,
            types=types,
            lease_s=lease_s,
            queues=queues,
            starting=starting,
        )

    def heartbeat(self, lease: Lease, *, lease_s: LeaseLength = DEFAULT_LEASE_S) -> JobState:
        """Renew a lease until now + ``lease_s``."""
        return self._fenced(lease.job_id, worker_writes.heartbeat_decision(lease, lease_s))

    def heartbeat_many(
        self, leases: Iterable[Lease], *, lease_s: LeaseLength = DEFAULT_LEASE_S
    ) -> BatchResult:
        """Renew many leases in one transaction (each still its own heartbeat event)."""
        return self._fenced_many(
            [(lease.job_id, worker_writes.heartbeat_decision(lease, lease_s)) for lease in leases]
        )

    def start_many(self, leases: Iterable[Lease]) -> BatchResult:
        """Record, in one transaction, that the handlers of ``leases`` are about to start (the
        stage ``running``, :func:`~ledger.core.decide.decide_start`). The pool writes this
        before it calls a handler, so a boot reap can tell an attempt whose handler ran when
        its process died (spent as ``worker_lost``) from a claim that never started
        (released). A lease whose fence fails is in ``rejected``: do not start its handler."""
        return self._fenced_many(
            [(lease.job_id, worker_writes.start_decision(lease)) for lease in leases]
        )

    def start_claimed(self, jobs: Sequence[JobState]) -> BatchResult:
        """As :meth:`start_many`, given the states the claim returned (each job's lease is
        its state's): a job still at that state's version is written without being read
        first, in one statement on PostgreSQL (``ledger.jobs.worker_writes.start_claimed``);
        one that moved on is decided on its stored state."""
        return worker_writes.start_claimed(self.store, self.clock, jobs)

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
            worker_writes.progress_decision(
                lease, stage=stage, done=done, total=total, checkpoint=checkpoint
            ),
        )

    def progress_known(
        self,
        known: JobState,
        *,
        stage: str | None = None,
        done: int | None = None,
        total: int | None = None,
        checkpoint: JSON | None = None,
    ) -> JobState:
        """:meth:`progress` of ``known``'s lease, decided on ``known`` (the state the caller's
        last write of the job returned): written without a read, in one statement on
        PostgreSQL, while the job is still at that version; decided on the stored state
        otherwise, as :meth:`progress` decides. The job's new state."""
        lease = known.lease
        if lease is None:
            raise LeaseOwnerMismatchError(f"job {known.job_id} is not leased")
        return worker_writes.write_one_known(
            self.store,
            self.clock,
            known,
            worker_writes.progress_decision(
                lease, stage=stage, done=done, total=total, checkpoint=checkpoint
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
        return self._fenced(lease.job_id, worker_writes.completion_decision(completion))

    def succeed_many(self, completions: Sequence[Completion]) -> BatchResult:
        """Record many successes in one transaction."""
        return self._fenced_many(
            [(c.lease.job_id, worker_writes.completion_decision(c)) for c in completions]
        )

    def fail(
        self, lease: Lease, failure: Failure, *, not_before: datetime | None = None
    ) -> JobState:
        """Record a failed attempt; the job is retried with backoff or dead-lettered."""
        report = FailureReport(lease, failure, not_before)
        return self._fenced(lease.job_id, worker_writes.outcome_decision(report, self._jitter))

    def finish_many(self, outcomes: Sequence[Outcome]) -> BatchResult:
        """Record many successes and failures in one transaction (the batch completer's
        write). Outcomes whose fence fails are reported in ``rejected``, nothing appended;
        but an outcome of a job cancelled under its lease records ``job_handler_stopped``
        (when and how its handler stopped), and its cancelled state is among ``accepted``."""
        return self._fenced_many(
            [
                (o.lease.job_id, worker_writes.worker_outcome_decision(o, self._jitter))
                for o in outcomes
            ]
        )

    def finish_claimed(self, items: Sequence[tuple[JobState | None, Outcome]]) -> BatchResult:
        """As :meth:`finish_many`, given for each outcome the state its worker last saw its
        job in (the state its start returned; ``None``: not known): a job still at that
        version is written without being read first, in one statement on PostgreSQL when the
        outcome changes nothing but its row (a plain job's success); the others as
        :meth:`finish_many` writes them (``ledger.jobs.worker_writes.finish_claimed``)."""
        return worker_writes.finish_claimed(self.store, self.clock, items, self._jitter)

    def start_and_finish_claimed(
        self, starting: Sequence[JobState], finished: Sequence[tuple[JobState | None, Outcome]]
    ) -> tuple[BatchResult, BatchResult]:
        """:meth:`start_claimed` and :meth:`finish_claimed` in one write (the pool's start
        write carries the outcomes gathered meanwhile): the starts' result, the outcomes'."""
        return worker_writes.start_and_finish_claimed(
            self.store, self.clock, starting, finished, self._jitter
        )

    def finish_and_claim(
        self,
        outcomes: Sequence[Outcome],
        worker_id: str,
        *,
        limit: int,
        types: Sequence[str] | None = None,
        lease_s: LeaseLength = DEFAULT_LEASE_S,
        queues: Sequence[str] | None = None,
        starting: int = 0,
    ) -> TurnResult:
        """One batch turn: record ``outcomes`` as :meth:`finish_many` does and claim up to
        ``limit`` jobs as :meth:`claim` does (``limit`` 0: none), in one transaction. A refused
        outcome is reported in ``finished.rejected`` and does not stop the claim; in commit
        order the outcomes precede the new leases (:mod:`ledger.jobs.finish_and_claim`). A cancelled
        job's outcome records ``job_handler_stopped``, as in :meth:`finish_many`. ``starting``
        as for :meth:`claim`."""
        return batch_turn.finish_and_claim(
            self.store,
            self.clock,
            [
                (o.lease.job_id, worker_writes.worker_outcome_decision(o, self._jitter))
                for o in outcomes
            ],
            worker_id,
            limit=limit,
            types=types,
            lease_s=lease_s,
            queues=queues,
            starting=starting,
        )

    def release(self, lease: Lease, *, reason: str = "released by worker") -> JobState:
        """Hand the job back at once without consuming the attempt (shutdown, cancellation)."""
        return self._fenced(
            lease.job_id, lambda s, now: decide.decide_release(s, lease, now, reason)
        )

    def _fenced(self, job_id: UUID, decision: worker_writes.Decision) -> JobState:
        return worker_writes.write_fenced(self.store, self.clock, job_id, decision)

    def _fenced_many(self, items: Sequence[tuple[UUID, worker_writes.Decision]]) -> BatchResult:
        return worker_writes.write_fenced_many(self.store, self.clock, items)
