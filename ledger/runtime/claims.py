"""The leases a pool holds: claimed in batches, renewed by the heartbeater, forgotten once the
job's outcome is recorded, its release is sent, or the fence says the lease is gone.

For each lease the pool remembers when it ends (as claimed, then as renewed) and when its
handler started, so that it can refuse to start a handler on a lease already past its end
and stop renewing a job whose run outlived its own ``timeout_s``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from time import perf_counter
from uuid import UUID

from ledger.api.ledger import Ledger, Outcome, TurnResult
from ledger.core.state import JobState, Lease
from ledger.jobs.leases import lease_for
from ledger.runtime.health import PoolStats

log = logging.getLogger(__name__)


START_MARGIN = 0.25
"""A handler is not started on a lease with less than this share of its length left: the
heartbeater renews a waiting job's lease every third of it, so that little left means the
renewals are not landing (the process was paused, the database is stalled), and a handler
started then would be running when its lease ends (seen by the chaos suite: a handler that
passed the check started 0.31 s after its lease had ended, on a host loaded after a resume)."""


MAX_KEPT_TIMEOUTS = 256


@dataclass(slots=True)
class _Held:
    lease: Lease
    expires_at: datetime
    timeout: timedelta
    length: timedelta
    """The lease's length, as claimed and renewed."""
    started_at: datetime | None = None
    overdue: bool = False
    """Its run passed ``timeout``: no longer renewed (said once in the log)."""
    finished: bool = False
    """Its outcome is on its way to the ledger: held (the pool is not idle) but not renewed."""


class Claims:
    """Claims due jobs for one worker id and remembers the leases they came with.

    :meth:`claim` blocks on the database (run it on the pool's I/O threads); the other
    methods are cheap and called from the event loop. A lease is held from its claim until
    :meth:`forget`, so the heartbeater renews claimed-but-waiting jobs too.
    """

    def __init__(
        self,
        ledger: Ledger,
        worker_id: str,
        *,
        types: Sequence[str],
        lease_s: dict[str, float],
        stats: PoolStats,
        queues: Sequence[str] | None = None,
        on_claimed: Callable[[float, list[JobState]], None] | None = None,
    ) -> None:
        self._ledger = ledger
        self._on_claimed = on_claimed
        self.worker_id = worker_id
        self.types = list(types)
        self.queues = list(queues) if queues is not None else None
        self.lease_s = lease_s
        self._stats = stats
        self._held: dict[UUID, _Held] = {}
        # Lease lengths by type and timeouts by seconds, made once rather than per job.
        self._lengths: dict[str, timedelta] = {}
        self._timeouts: dict[float, timedelta] = {}

    def claim(
        self, limit: int, types: Sequence[str] | None = None, starting: int = 0
    ) -> list[JobState]:
        """Up to ``limit`` due jobs of ``types`` (default: :attr:`types`; in :attr:`queues`, if
        set), leased in one transaction (none if no type is given); the first ``starting``
        recorded as started (slots are waiting for them: :mod:`ledger.runtime.starts`)."""
        wanted = self.types if types is None else list(types)
        if not wanted:
            return []
        started = perf_counter()
        jobs = self._ledger.claim(
            self.worker_id,
            limit=limit,
            types=wanted,
            lease_s=self.lease_s,
            queues=self.queues,
            starting=starting,
        )
        if self._on_claimed is not None:
            self._on_claimed(perf_counter() - started, jobs)
        return self._hold(jobs)

    def finish_and_claim(
        self, outcomes: Sequence[Outcome], limit: int, types: Sequence[str], starting: int = 0
    ) -> TurnResult:
        """Record ``outcomes`` and claim up to ``limit`` due jobs of ``types`` (in
        :attr:`queues`, if set) in one transaction (:meth:`Ledger.finish_and_claim`); the
        claimed jobs are held from here, the outcomes' leases stay held until the caller
        forgets them."""
        started = perf_counter()
        turn = self._ledger.finish_and_claim(
            outcomes,
            self.worker_id,
            limit=limit,
            types=list(types),
            lease_s=self.lease_s,
            queues=self.queues,
            starting=starting,
        )
        if self._on_claimed is not None:
            self._on_claimed(perf_counter() - started, turn.claimed)
        self._hold(turn.claimed)
        return turn

    def _hold(self, jobs: list[JobState]) -> list[JobState]:
        lengths, timeouts = self._lengths, self._timeouts
        for job in jobs:
            assert job.lease is not None and job.lease_expires_at is not None
            timeout = timeouts.get(job.timeout_s)
            if timeout is None:
                timeout = timedelta(seconds=job.timeout_s)
                if len(timeouts) < MAX_KEPT_TIMEOUTS:  # jobs may each set their own
                    timeouts[job.timeout_s] = timeout
            length = lengths.get(job.job_type)
            if length is None:
                length = timedelta(seconds=lease_for(self.lease_s, job.job_type))
                lengths[job.job_type] = length
            self._held[job.job_id] = _Held(job.lease, job.lease_expires_at, timeout, length)
        self._stats.claimed += len(jobs)
        return jobs

    def leases(self) -> list[Lease]:
        return [held.lease for held in self._held.values()]

    def renewable(self, now: datetime) -> list[Lease]:
        """The held leases the heartbeater should renew at ``now``: all but those whose
        handler has run longer than the job's own timeout (a handler that cannot be stopped
        must not keep its lease forever: left to expire, the reaper takes it). Called on the
        heartbeat thread while the loop claims and forgets: it reads a copy of the table
        (one C-level copy, atomic under the GIL)."""
        renew = []
        for job_id, held in self._held.copy().items():
            if held.finished:
                continue
            if held.started_at is not None and now - held.started_at > held.timeout:
                if not held.overdue:
                    held.overdue = True
                    log.error(
                        "job %s has run past its timeout (%gs) and is still held: its lease is "
                        "no longer renewed, so the reaper will take it",
                        job_id,
                        held.timeout.total_seconds(),
                    )
                continue
            renew.append(held.lease)
        return renew

    def renewed(self, states: Iterable[JobState]) -> None:
        """Remember the new ends of renewed leases (on the heartbeat thread: one attribute
        written per lease)."""
        for state in states:
            held = self._held.get(state.job_id)
            if held is not None and state.lease_expires_at is not None:
                held.expires_at = state.lease_expires_at

    def start(self, job_id: UUID, now: datetime) -> bool:
        """Mark ``job_id``'s handler as starting at ``now``; false (and the lease forgotten)
        if the lease has ended or is about to (less than :data:`START_MARGIN` of it left) —
        the fence would refuse its writes, and its job may be running elsewhere by now."""
        held = self._held.get(job_id)
        if held is None:
            return False  # lost meanwhile (the heartbeater was refused)
        if held.expires_at - held.length * START_MARGIN < now:
            self.forget(job_id)
            return False
        held.started_at = now
        return True

    def finished(self, job_id: UUID) -> None:
        """The job's outcome was handed to the completer: keep holding the lease (until
        :meth:`forget`) but stop renewing it."""
        held = self._held.get(job_id)
        if held is not None:
            held.finished = True

    def forget(self, job_id: UUID) -> None:
        self._held.pop(job_id, None)

    def __len__(self) -> int:
        return len(self._held)
