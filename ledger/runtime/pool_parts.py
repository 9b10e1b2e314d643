"""The pieces one pool's jobs pass through, built from its :class:`PoolConfig` and wired to
each other: the claims it holds, the producer that claims them, the slots, the executor, the
completer, the start recorder, the releaser, the heartbeater and the wake-up, and the two
thread lanes they run on (:mod:`ledger.runtime.threads`). What the heartbeater, the completer
and the wake-up report is answered here too, since it only moves between these pieces and
the pool's stats and metrics. The pool (:mod:`ledger.runtime.pool`) starts and stops them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any
from uuid import UUID

from ledger.api.ledger import Ledger
from ledger.core.state import JobState
from ledger.runtime.batch_turns import BatchTurns
from ledger.runtime.breaker import CircuitBreaker
from ledger.runtime.claims import Claims
from ledger.runtime.completer import BatchCompleter
from ledger.runtime.config import PoolConfig
from ledger.runtime.executor import Executor
from ledger.runtime.handlers import Registry
from ledger.runtime.health import PoolStats
from ledger.runtime.heartbeater import Heartbeater
from ledger.runtime.loop_watch import LoopBlocks
from ledger.runtime.pool_metrics import PoolMetrics
from ledger.runtime.producer import Producer
from ledger.runtime.releases import Releaser
from ledger.runtime.slots import WorkerSlots
from ledger.runtime.starts import StartRecorder
from ledger.runtime.threads import ThreadLane
from ledger.runtime.wakeup import Wakeup


class PoolParts:
    """One pool's pieces, wired. ``breaker`` is shared if given (else one of this pool's own,
    from the config); ``report_now`` writes the pool's report at once, for the loop watch to
    call while the event loop is blocked."""

    def __init__(
        self,
        ledger: Ledger,
        registry: Registry,
        config: PoolConfig,
        *,
        worker_id: str,
        stats: PoolStats,
        metrics: PoolMetrics,
        breaker: CircuitBreaker | None,
        resources: Mapping[str, Any],
        report_now: Callable[[], None],
    ) -> None:
        self._stats = stats
        self._metrics = metrics
        self.breaker = breaker or CircuitBreaker(
            ledger.clock,
            threshold=config.breaker_threshold,
            cooldown_s=config.breaker_cooldown_s,
        )
        self.io = ThreadLane(config.io_threads, "jobledger-io")
        self.handler_threads = ThreadLane(max(1, config.concurrency), "jobledger-handler")
        self.lease_lengths = lease_lengths = registry.lease_lengths(config.lease_s)
        self.claims = Claims(
            ledger,
            worker_id,
            types=config.claimed_types(registry),
            queues=config.queues,
            lease_s=lease_lengths,
            stats=stats,
            on_claimed=metrics.claim_finished,
        )
        self.releaser = Releaser(ledger, self.claims, stats, self.io)
        self.wakeup = Wakeup(ledger, on_cancelled=self._renew_now)
        self.executor = Executor(
            ledger,
            registry,
            breaker=self.breaker,
            releaser=self.releaser,
            lease_s=lease_lengths,
            resources=resources,
            handler_threads=self.handler_threads,
            io_threads=self.io,
        )
        self.completer = self._completer(ledger, config)
        self.producer = self._producer(config)
        self.heartbeater = self._heartbeater(ledger, config)
        self.loop_blocks = LoopBlocks(ledger.clock, stats, metrics, report_now=report_now)
        self.starts = self._starts(ledger, config)
        self.slots = WorkerSlots(
            self.producer,
            claims=self.claims,
            executor=self.executor,
            completer=self.completer,
            starts=self.starts,
            releaser=self.releaser,
            clock=ledger.clock,
            stats=stats,
            metrics=metrics,
            yield_between_jobs=config.batch_turns,
        )

    def _completer(self, ledger: Ledger, config: PoolConfig) -> BatchCompleter:
        """Records outcomes many to a transaction, or leaves them to the producer's next
        claim while it is about to claim (batch turns)."""
        return BatchCompleter(
            ledger,
            lease_s=self.lease_lengths,
            max_batch=config.completion_batch,
            max_delay_s=config.completion_delay_s,
            on_recorded=self._recorded,
            io=self.io,
            defer_to=lambda: self.producer.expects_turn,
            hold_s=config.turn_hold_s,
            nothing_else_coming=lambda: self.producer.blocked_on_outcomes,
        )

    def _producer(self, config: PoolConfig) -> Producer:
        turns = BatchTurns(self.claims, self.completer, self.io) if config.batch_turns else None
        return Producer(
            self.claims,
            concurrency=config.concurrency,
            prefetch=config.prefetch,
            poll_interval_s=config.poll_interval_s,
            breaker=self.breaker,
            wakeup=self.wakeup,
            io=self.io,
            turns=turns,
            on_blocked=self.completer.nudge,
            start_every_claim=not config.exact_starts,
        )

    def _heartbeater(self, ledger: Ledger, config: PoolConfig) -> Heartbeater:
        """Renews every held lease in one transaction from a thread of its own; the fence's
        answer says which leases were lost and which jobs were cancelled under them."""
        return Heartbeater(
            ledger,
            lambda: self.claims.renewable(ledger.clock.now()),
            lease_s=self.lease_lengths,
            interval_s=config.heartbeat_interval(self.lease_lengths),
            on_lost=self._lease_lost,
            io=self.io,
            on_renewed=self._renewed,
            on_cancelled=self._job_cancelled,
        )

    def _starts(self, ledger: Ledger, config: PoolConfig) -> StartRecorder:
        """Records handlers' starts, asking for as many more as the slots have room for."""
        return StartRecorder(
            ledger,
            self.io,
            self.lease_lengths,
            could_ask=lambda: (
                config.concurrency - self.producer.in_flight - self.producer.waiting_slots
            ),
            outcomes=self.completer,
        )

    # --- what the completer, the heartbeater and the wake-up report -----------------------

    def _recorded(self, state: JobState) -> None:
        self._stats.count_recorded(state)
        self._metrics.outcome_recorded(state)

    def _renewed(self, states: list[JobState]) -> None:
        self.claims.renewed(states)
        self._metrics.leases_renewed(states)

    def _lease_lost(self, job_id: UUID) -> None:
        self.claims.forget(job_id)
        self._stats.fenced_out += 1

    def _renew_now(self) -> None:
        """Another process cancelled leased jobs: renew at once, and the fence's answer
        says which of ours to stop."""
        self.heartbeater.poke()

    def _job_cancelled(self, job_id: UUID) -> None:
        """The fence says ``job_id`` was cancelled under our lease: stop its handler."""
        if self.executor.cancel(job_id):
            self._stats.handlers_cancelled += 1
