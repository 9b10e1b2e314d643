"""The worker pool's settings, in one frozen value.

:class:`PoolConfig` holds every tunable of a :class:`~ledger.runtime.pool.WorkerPool` with its
default; the pool and the helpers in :mod:`ledger.testing` accept the same names as keyword
arguments (:class:`PoolSettings`), so ``WorkerPool(ledger, registry, concurrency=4)`` and
``WorkerPool(ledger, registry, PoolConfig(concurrency=4))`` build the same pool. The live
objects a pool is given (a shared circuit breaker, the handlers' resources) are not settings
and stay separate arguments.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypedDict

from ledger.core.limits import MAX_LEASE_S, check_setting_seconds
from ledger.maintenance.archiver import ArchiverConfig
from ledger.maintenance.chain_witness import DEFAULT_INTERVAL_S as DEFAULT_INTEGRITY_INTERVAL_S
from ledger.maintenance.chain_witness import ChainWitnessConfig
from ledger.maintenance.pool_reporter import PoolReporterConfig
from ledger.maintenance.reaper import ReaperConfig
from ledger.maintenance.scheduler import DEFAULT_SCHEDULER_INTERVAL_S, SchedulerConfig
from ledger.maintenance.watchdog import WatchdogConfig
from ledger.runtime.breaker import DEFAULT_COOLDOWN_S, DEFAULT_THRESHOLD
from ledger.runtime.handlers import Registry
from ledger.runtime.threads import DEFAULT_IO_THREADS


@dataclass(frozen=True)
class PoolConfig:
    """How a pool claims, runs, completes, heartbeats and reaps. Seconds throughout."""

    concurrency: int = 10
    """Worker slots: jobs whose handlers may run at once (0: claim nothing, only reap)."""
    types: Sequence[str] | None = None
    """The job types to claim; ``None`` means every type the registry has a handler for."""
    queues: Sequence[str] | None = None
    """The queues to claim from (``"default"``: jobs enqueued without one); ``None``: all."""
    name: str = "default"
    """The pool's name, the first part of its worker id ``<name>@<host>:<pid>``."""
    host: str | None = None
    """The worker id's host part; ``None``: this machine's hostname. The boot reap judges a
    claim's pid only under its own host id, so each pid namespace needs its own where
    hostnames repeat (containers sharing the host's network, or given one hostname)."""
    lease_s: float = 30.0
    """Lease length for types whose handler sets none."""
    poll_interval_s: float = 1.0
    """How long an idle producer waits for a wake-up before it looks again."""
    prefetch: int | None = None
    """Claimed jobs that may wait for a free slot; ``None`` adapts it to the handlers' pace."""
    heartbeat_interval_s: float | None = None
    """Between lease renewals; ``None`` is a third of the shortest lease."""
    reaper_interval_s: float = 30.0
    """Between reaper passes; 0 runs no reaper in this pool."""
    reaper_retry_delay_s: float = 60.0
    reaper_batch: int = 500
    reaper_lock_timeout_s: float | None = 2.0
    """A reap blocked on a lock would hold the events-table lock and stall every writer: the
    reaper gives up on that job after this long (it is deferred, not lost)."""
    scheduler_interval_s: float = DEFAULT_SCHEDULER_INTERVAL_S
    """Between scheduler passes, which fire the cron schedules' due slots
    (:mod:`ledger.maintenance.scheduler`; any number of pools may run one, each slot still
    fires once); 0 runs no scheduler in this pool."""
    watchdog_interval_s: float | None = None
    """Between watchdog passes, which end a database session frozen inside a write that
    blocks other writers (PostgreSQL: :mod:`ledger.maintenance.watchdog`); ``None`` is half
    the ledger's idle-in-transaction bound (at least 0.5 s); 0 runs no watchdog here."""
    retention_interval_s: float = 0.0
    """Between archiver passes (retention: :mod:`ledger.maintenance.archiver`, moving the
    finished jobs past their rule to the archive); 0, the default, runs none here."""
    integrity_interval_s: float = DEFAULT_INTEGRITY_INTERVAL_S
    """Between passes of the chain witness, which hashes the new events into the history's
    hash chain (:mod:`ledger.maintenance.chain_witness`; docs/integrity.md); 0 runs none
    here."""
    checkpoint_every: int = 10_000
    """Events between two of the chain's checkpoints."""
    signing_key_file: str | None = None
    """An ed25519 private key (PEM) the witness signs the checkpoints with; ``None``: this
    pool signs none (and, once a signed checkpoint exists, leaves checkpoints to a process
    that holds the key)."""
    report_interval_s: float = 5.0
    """Between the pool's reports of itself into ``jl_pools`` (its health, in flight:
    :mod:`ledger.maintenance.pool_reporter`); a reader counts it dead once it is silent for
    three of them. 0 reports nothing."""
    metrics: bool = False
    """Feed the pool's Prometheus instruments (:mod:`ledger.runtime.pool_metrics`; ``jobledger
    worker --metrics-port`` turns it on). Off by default, so a pool that serves no metrics
    does not pay ~5 µs of its event loop per job for them (bench/README.md, "Pool metrics'
    cost")."""
    report_retention_s: float = 3600.0
    """How long the rows of silent (dead) pools are kept before a report deletes them."""
    completion_batch: int = 200
    """At most this many outcomes per completion transaction."""
    completion_delay_s: float = 0.005
    """How long the completer gathers outcomes before it writes them (at most: a pool whose
    held leases are all finished outcomes, with no room to claim, writes them at once)."""
    exact_starts: bool = True
    """Record each handler's start before calling it, so that a restarted pool's boot reap
    spends the attempt only of the jobs whose handler was running when the process died
    (``worker_lost``) and releases the rest free. A job claimed for a waiting slot gets it in
    the claim's transaction; one that waited in the prefetch buffer costs a group-committed
    write before it starts (one statement on PostgreSQL; the price, for tiny handlers:
    bench/README.md, "Handler starts without a read"). False: every claimed job is recorded
    as started by its claim, at no extra transaction; a crash then spends the attempt of
    every job the process held, the buffered ones too (as River and Oban count a fetched
    job's attempt)."""
    batch_turns: bool = False
    """Record the gathered outcomes in the transaction of the producer's next claim (one
    commit per batch turn instead of two: :mod:`ledger.runtime.batch_turns`). Opt-in: it halves the
    transactions per job at C=10, but no throughput gain was measured (bench/README.md)."""
    turn_hold_s: float = 0.2
    """With ``batch_turns``: how long gathered outcomes wait for the producer's next claim,
    while it is about to claim, before the completer writes them on its own."""
    breaker_threshold: int = DEFAULT_THRESHOLD
    """Consecutive retryable failures of one job type that open its circuit breaker."""
    breaker_cooldown_s: float = DEFAULT_COOLDOWN_S
    """How long an open breaker keeps its type from being claimed."""
    io_threads: int = DEFAULT_IO_THREADS
    """Threads for the pool's own database calls (sync handlers get ``concurrency`` threads
    of their own; neither uses asyncio's default executor)."""
    define_types: bool = True
    """Define each registered type that is undefined from its handler's options at start
    (a defined one is kept; a difference is logged: :mod:`ledger.runtime.definitions`)."""
    apply_definitions: bool = False
    """With ``define_types``: also apply the handlers' options to types already defined."""
    follow_projections: bool = False
    """Keep the tracked views (audit) current from a thread of this process. Off by default:
    the follower's decoding competes with the handlers for the GIL (measured: ~25% of a pool's
    throughput on 2 cores); one ``jobledger projections follow`` process per deployment does
    the same work without that cost."""

    def __post_init__(self) -> None:
        if self.concurrency < 0:
            raise ValueError("concurrency must be >= 0")
        if self.breaker_threshold < 1 or self.breaker_cooldown_s < 0:
            raise ValueError("breaker_threshold must be >= 1 and breaker_cooldown_s >= 0")
        if self.io_threads < 1:
            raise ValueError("io_threads must be >= 1")
        if self.watchdog_interval_s is not None and self.watchdog_interval_s < 0:
            raise ValueError("watchdog_interval_s must be >= 0 (0: no watchdog)")
        if self.host is not None:
            check_host_id(self.host)
        if self.report_interval_s < 0:
            raise ValueError("report_interval_s must be >= 0 (0: no reports)")
        if self.scheduler_interval_s < 0:
            raise ValueError("scheduler_interval_s must be >= 0 (0: no scheduler)")
        if self.integrity_interval_s < 0:
            raise ValueError("integrity_interval_s must be >= 0 (0: no chain witness)")
        if self.checkpoint_every < 1:
            raise ValueError("checkpoint_every must be at least 1")
        self._check_durations()

    def _check_durations(self) -> None:
        """Every duration finite and at most a century (a lease at most a week), like the
        ledger's own: an interval of ``1e300`` would raise ``OverflowError`` in a loop's
        ``now + interval`` long after the pool started, not here."""
        check_setting_seconds(self.lease_s, "lease_s", most=MAX_LEASE_S)
        if self.heartbeat_interval_s is not None:
            check_setting_seconds(self.heartbeat_interval_s, "heartbeat_interval_s")
        if self.reaper_lock_timeout_s is not None:
            check_setting_seconds(self.reaper_lock_timeout_s, "reaper_lock_timeout_s")
        if self.watchdog_interval_s is not None:
            check_setting_seconds(self.watchdog_interval_s, "watchdog_interval_s", zero=True)
        check_setting_seconds(self.poll_interval_s, "poll_interval_s")
        for name in (
            "reaper_interval_s",
            "reaper_retry_delay_s",
            "scheduler_interval_s",
            "retention_interval_s",
            "report_interval_s",
            "report_retention_s",
            "completion_delay_s",
            "turn_hold_s",
            "breaker_cooldown_s",
        ):
            check_setting_seconds(getattr(self, name), name, zero=True)

    @classmethod
    def of(cls, config: PoolConfig | None, settings: PoolSettings) -> PoolConfig:
        """``config`` (or the defaults) with ``settings`` applied over it; an unknown setting
        is a ``TypeError``, as an unknown keyword argument is."""
        return dataclasses.replace(config or cls(), **settings)

    def claimed_types(self, registry: Registry) -> list[str]:
        """:attr:`types`, else every type ``registry`` has a handler for."""
        return list(self.types) if self.types is not None else registry.job_types()

    def heartbeat_interval(self, lease_lengths: dict[str, float]) -> float:
        """The configured interval, else a third of the shortest lease any claim may get."""
        shortest = min([self.lease_s, *lease_lengths.values()])
        return self.heartbeat_interval_s or shortest / 3

    def watchdog_config(self) -> WatchdogConfig | None:
        """The watchdog's settings; ``None`` when this pool runs none."""
        if self.watchdog_interval_s == 0:
            return None
        return WatchdogConfig(interval_s=self.watchdog_interval_s)

    def reporter_config(self) -> PoolReporterConfig | None:
        """The pool reporter's settings; ``None`` when this pool reports nothing."""
        if self.report_interval_s == 0:
            return None
        retention_s = max(self.report_retention_s, self.report_interval_s)
        return PoolReporterConfig(interval_s=self.report_interval_s, retention_s=retention_s)

    def chain_witness_config(self) -> ChainWitnessConfig | None:
        """The chain witness's settings; ``None`` when this pool runs none."""
        if self.integrity_interval_s == 0:
            return None
        return ChainWitnessConfig(
            interval_s=self.integrity_interval_s,
            checkpoint_every=self.checkpoint_every,
            signing_key_file=self.signing_key_file,
        )

    def archiver_config(self) -> ArchiverConfig | None:
        """The archiver's, or ``None`` when this pool runs none (the default)."""
        if self.retention_interval_s <= 0:
            return None
        return ArchiverConfig(interval_s=self.retention_interval_s)

    def scheduler_config(self) -> SchedulerConfig | None:
        """The scheduler's settings; ``None`` when this pool runs none."""
        if self.scheduler_interval_s == 0:
            return None
        return SchedulerConfig(interval_s=self.scheduler_interval_s)

    def reaper_config(self) -> ReaperConfig:
        return ReaperConfig(
            limit=self.reaper_batch,
            retry_delay_s=self.reaper_retry_delay_s,
            lock_timeout_s=self.reaper_lock_timeout_s,
            interval_s=self.reaper_interval_s if self.reaper_interval_s > 0 else 30.0,
        )


def check_host_id(host: str) -> str:
    """``host`` if it can be a worker id's host part: non-empty, without the id's separators
    (``@``, ``:``) or whitespace; else a ``ValueError``."""
    if not host or any(c in host for c in "@:") or any(c.isspace() for c in host):
        raise ValueError("a host id must be non-empty, without '@', ':' or whitespace")
    return host


def worker_idle_in_transaction_s(lease_s: float) -> float:
    """The idle-in-transaction timeout a worker process opens its ledger with: half its lease,
    between 2 s and 60 s. A worker's units of work never sit idle (statements follow each
    other), so only a frozen process (SIGSTOP, a debugger, a swapped-out VM) hits it — and
    then the server ends its session and releases its locks (on PostgreSQL the events
    table's lock, which every writer waits for) well before its leases expire, instead of
    stalling the whole ledger for the 60 s default. A process frozen in the middle of a
    pipelined write, which no server timeout ends, is the pool's watchdog's to end
    (:mod:`ledger.maintenance.watchdog`), after half this bound."""
    return max(2.0, min(60.0, lease_s / 2))


class PoolSettings(TypedDict, total=False):
    """:class:`PoolConfig`'s fields as keyword arguments (a test holds the two in step)."""

    concurrency: int
    types: Sequence[str] | None
    queues: Sequence[str] | None
    name: str
    host: str | None
    lease_s: float
    poll_interval_s: float
    prefetch: int | None
    heartbeat_interval_s: float | None
    reaper_interval_s: float
    reaper_retry_delay_s: float
    reaper_batch: int
    reaper_lock_timeout_s: float | None
    retention_interval_s: float
    scheduler_interval_s: float
    watchdog_interval_s: float | None
    integrity_interval_s: float
    checkpoint_every: int
    signing_key_file: str | None
    report_interval_s: float
    report_retention_s: float
    metrics: bool
    completion_batch: int
    completion_delay_s: float
    exact_starts: bool
    batch_turns: bool
    turn_hold_s: float
    breaker_threshold: int
    breaker_cooldown_s: float
    io_threads: int
    define_types: bool
    apply_definitions: bool
    follow_projections: bool
