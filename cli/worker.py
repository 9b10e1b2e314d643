"""``jobledger worker``: run a worker pool over the handlers of an application module."""

from __future__ import annotations

import asyncio
import importlib
import logging
import os
import signal
import sys
from collections.abc import Callable
from dataclasses import dataclass

import click

from . import params
from .database import Settings, describe
from .errors import CliError
from .option_groups import option_group
from .render import echo_json, json_option
from ledger.api.ledger import Ledger
from ledger.api.shaping import plain
from ledger.core.limits import MAX_LEASE_S
from ledger.core.source_polls.events import SOURCE_POLL_JOB_TYPE
from ledger.runtime.breaker import DEFAULT_COOLDOWN_S, DEFAULT_THRESHOLD
from ledger.runtime.config import PoolConfig, check_host_id, worker_idle_in_transaction_s
from ledger.runtime.handlers import Registry
from ledger.runtime.health import PoolStats
from ledger.runtime.pool import WorkerPool
from ledger.runtime.pool_metrics import serve_metrics


class DeadJobsError(CliError):
    """``--burst`` processed at least one job that ended dead."""

    exit_code = 3


def _host_id(value: str | None) -> str | None:
    if value is None:
        return None
    try:
        return check_host_id(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None


@dataclass(frozen=True)
class PoolOptions:
    """The options that become the pool's settings (:class:`PoolConfig`), as given."""

    concurrency: int
    types: str | None
    queues: str | None
    lease: float
    poll: float
    follow_projections: bool
    apply_definitions: bool
    host_id: str | None
    reaper_interval: float
    reaper_retry_delay: float
    retention_interval: float
    scheduler_interval: float
    breaker_threshold: int
    breaker_cooldown: float
    starts: str
    report_interval: float
    integrity_interval: float
    checkpoint_every: int
    signing_key: str | None

    def selected_types(self, registry: Registry) -> list[str] | None:
        """``--types`` as a list (``None``: every type ``registry`` serves); a type it has no
        handler for is a usage error."""
        types = self.types
        selected = [t.strip() for t in types.split(",") if t.strip()] if types else None
        served = {*registry.job_types(), *([SOURCE_POLL_JOB_TYPE] if registry.sources() else [])}
        unknown = sorted(set(selected or []) - served)
        if unknown:
            raise click.BadParameter(f"no handler registered for {unknown}", param_hint="--types")
        return selected

    def queue_names(self) -> list[str] | None:
        """``--queues`` as a list (``None``: every queue); naming none is a usage error."""
        queues = self.queues
        queue_names = [q.strip() for q in queues.split(",") if q.strip()] if queues else None
        if queues is not None and not queue_names:
            raise click.BadParameter("name at least one queue", param_hint="--queues")
        return queue_names

    def config(
        self, *, types: list[str] | None, queues: list[str] | None, metrics: bool
    ) -> PoolConfig:
        """The pool's settings: these options, the parsed ``types`` and ``queues``, and
        whether the pool feeds its metrics."""
        return PoolConfig(
            concurrency=self.concurrency,
            types=types,
            queues=queues,
            lease_s=self.lease,
            poll_interval_s=self.poll,
            follow_projections=self.follow_projections,
            apply_definitions=self.apply_definitions,
            host=self.host_id,
            reaper_interval_s=self.reaper_interval,
            reaper_retry_delay_s=self.reaper_retry_delay,
            retention_interval_s=self.retention_interval,
            scheduler_interval_s=self.scheduler_interval,
            breaker_threshold=self.breaker_threshold,
            breaker_cooldown_s=self.breaker_cooldown,
            exact_starts=self.starts == "exact",
            report_interval_s=self.report_interval,
            integrity_interval_s=self.integrity_interval,
            checkpoint_every=self.checkpoint_every,
            signing_key_file=self.signing_key,
            metrics=metrics,
        )


@dataclass(frozen=True)
class RunOptions:
    """How this process runs the pool: until a signal stops it (with ``grace``) or, with
    ``burst``, until nothing is due; and where it serves its metrics, if anywhere."""

    grace: float
    burst: bool
    metrics_port: int | None
    metrics_addr: str


def load_registry(app: str) -> Registry:
    """``module:attr`` → the :class:`Registry` it names (the current directory is importable,
    as with other Python app servers)."""
    module_name, _, attr = app.partition(":")
    if not module_name or not attr:
        raise click.BadParameter(f"{app!r} is not MODULE:ATTR", param_hint="--app")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise click.BadParameter(
            f"cannot import {module_name!r}: {exc}", param_hint="--app"
        ) from None
    if not hasattr(module, attr):
        raise click.BadParameter(f"module {module_name!r} has no {attr!r}", param_hint="--app")
    registry = getattr(module, attr)
    if not isinstance(registry, Registry):
        raise click.BadParameter(
            f"{app!r} is {type(registry).__name__}, not a ledger.runtime.handlers.Registry",
            param_hint="--app",
        )
    return registry


async def _serve(pool: WorkerPool, grace_s: float) -> PoolStats:
    """Run until SIGINT/SIGTERM; the first signal stops gracefully, a second at once."""
    loop = asyncio.get_running_loop()
    stop, at_once = asyncio.Event(), asyncio.Event()

    def on_signal() -> None:
        (at_once if stop.is_set() else stop).set()

    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, on_signal)
    await pool.start()
    await stop.wait()
    click.echo(f"stopping (grace {grace_s:g}s; signal again to stop at once)", err=True)
    stopping = asyncio.ensure_future(pool.stop(grace_s=grace_s))
    second = asyncio.ensure_future(at_once.wait())
    await asyncio.wait([stopping, second], return_when=asyncio.FIRST_COMPLETED)
    if not stopping.done():
        stopping.cancel()  # cancelling stop() releases the in-flight jobs before it returns
    second.cancel()
    try:
        await stopping
    except asyncio.CancelledError:
        click.echo("stopped at once; in-flight jobs were released", err=True)
    return pool.stats


def _serve_metrics(
    pool: WorkerPool, ledger: Ledger, port: int | None, addr: str
) -> Callable[[], None] | None:
    """Start the ``/metrics`` server if a port is given; the function that stops it."""
    if port is None:
        return None
    pool.metrics.watch(pool, ledger)
    try:
        stop = serve_metrics(pool.metrics.registry, port, addr)
    except OSError as exc:
        raise CliError(f"cannot serve metrics on {addr}:{port}: {exc.strerror or exc}") from None
    click.echo(f"metrics on http://{addr}:{port}/metrics", err=True)
    return stop


def _abandon_hung_handlers(pool: WorkerPool, dead: int) -> None:
    """Exit now if sync handlers are still running after the pool stopped (their jobs were
    released or recorded already): Python cannot stop a thread, and the interpreter would
    wait for them at exit — a worker that a second signal could not stop."""
    if pool.busy_handler_threads:
        click.echo(
            f"abandoning {pool.busy_handler_threads} sync handler thread(s) still running",
            err=True,
        )
        if dead:
            click.echo(f"error: {dead} job(s) ended dead", err=True)
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(DeadJobsError.exit_code if dead else 0)


@click.command()
@click.option("--app", required=True, metavar="MODULE:ATTR", help="The handlers' Registry.")
@click.option(
    "--concurrency",
    type=click.IntRange(min=1),
    default=10,
    show_default=True,
    help="Handlers running at once.",
)
@click.option("--types", metavar="A,B", help="Only these job types  [default: all registered]")
@click.option(
    "--queues",
    metavar="A,B",
    help="Only jobs in these queues ('default': jobs enqueued without one)  [default: all]",
)
@click.option(
    "--lease",
    type=params.Seconds(1, most=MAX_LEASE_S),
    default=30.0,
    show_default=True,
    metavar="SECONDS",
    help="Lease length; renewed every third of it.",
)
@click.option(
    "--poll",
    type=params.Seconds(0.01),
    default=1.0,
    show_default=True,
    metavar="SECONDS",
    help="Idle poll interval (fallback to wake-up signals).",
)
@click.option(
    "--grace",
    type=params.Seconds(),
    default=30.0,
    show_default=True,
    metavar="SECONDS",
    help="How long shutdown waits for in-flight jobs.",
)
@click.option(
    "--burst", is_flag=True, help="Exit when nothing is due; exit code 3 if a job ended dead."
)
@click.option(
    "--projections/--no-projections",
    "follow_projections",
    default=False,
    show_default=True,
    help="Also keep the tracked views (audit) caught up, from a thread of this process "
    "(costs handler throughput; `projections follow` in its own process does not).",
)
@click.option(
    "--apply-definitions",
    is_flag=True,
    help="Apply the handlers' definition options (max attempts, timeout, backoff) to job "
    "types already defined; without it a stored definition that differs is kept and logged.",
)
@click.option(
    "--host-id",
    envvar="JOBLEDGER_HOST_ID",
    callback=lambda _ctx, _param, value: _host_id(value),
    metavar="ID",
    help="The host part of this worker's id (name@HOST:pid), where hostnames are not unique "
    "per pid namespace (containers on the host's network)  [default: $JOBLEDGER_HOST_ID, "
    "else the hostname]",
)
# --- the pool's reaper (issue 12) ------------------------------------------------------------
@click.option(
    "--reaper-interval",
    type=params.Seconds(0, open_least=True),
    default=PoolConfig.reaper_interval_s,
    show_default=True,
    metavar="SECONDS",
    help="Between the pool's reaper passes (the first runs at start).",
)
@click.option(
    "--retention-interval",
    type=params.Seconds(),
    default=PoolConfig.retention_interval_s,
    show_default=True,
    metavar="SECONDS",
    help="Between the pool's retention passes (`jobledger retention`); 0: none here.",
)
@click.option(
    "--reaper-retry-delay",
    type=params.Seconds(0, open_least=True),
    default=PoolConfig.reaper_retry_delay_s,
    show_default=True,
    metavar="SECONDS",
    help="Delay before a reaped job runs again; also how far a deferred reap pushes the lease.",
)
# --- end of the pool's reaper options ---------------------------------------------------------
@click.option(
    "--scheduler-interval",
    type=params.Seconds(),
    default=PoolConfig.scheduler_interval_s,
    show_default=True,
    metavar="SECONDS",
    help="Between the pool's scheduler passes, which fire the cron schedules' due slots "
    "(any number of workers may run one; each slot fires once); 0: no scheduler here.",
)
# --- the circuit breaker and the second signal (issue 12: runtime under real use) ----------
@click.option(
    "--breaker-threshold",
    type=click.IntRange(min=1),
    default=DEFAULT_THRESHOLD,
    show_default=True,
    metavar="N",
    help="Consecutive retryable failures of one job type that stop claiming that type.",
)
@click.option(
    "--breaker-cooldown",
    type=params.Seconds(),
    default=DEFAULT_COOLDOWN_S,
    show_default=True,
    metavar="SECONDS",
    help="How long a job type stays unclaimed once its breaker opened.",
)
# --- end of the circuit breaker block ------------------------------------------------------
@click.option(
    "--starts",
    type=click.Choice(["exact", "claim"]),
    default="exact",
    show_default=True,
    help="exact: record each handler's start before it runs, so a crash spends the attempt "
    "only of the jobs that were running (costs a transaction per group of prefetched "
    "starts); claim: a claim counts as the start (no extra transaction; a crash spends the "
    "attempt of every job the process held).",
)
# --- metrics and pool reports (issue 15) ------------------------------------------------------
@click.option(
    "--metrics-port",
    type=click.IntRange(min=1, max=65535),
    metavar="PORT",
    help="Serve Prometheus metrics on http://ADDR:PORT/metrics (this pool's and the "
    "ledger's: docs/operations.md#metrics)  [default: none]",
)
@click.option(
    "--metrics-addr",
    default="127.0.0.1",
    show_default=True,
    metavar="ADDR",
    help="The address --metrics-port listens on (0.0.0.0: every interface).",
)
@click.option(
    "--report-interval",
    type=params.Seconds(0, open_least=True),
    default=PoolConfig.report_interval_s,
    show_default=True,
    metavar="SECONDS",
    help="Between this pool's reports into jl_pools (`jobledger pools`); silent for three "
    "of them, it counts as dead.",
)
# --- end of metrics and pool reports ----------------------------------------------------------
# --- the history's hash chain (issue 31; docs/integrity.md) ----------------------------------
@click.option(
    "--integrity-interval",
    type=params.Seconds(),
    default=PoolConfig.integrity_interval_s,
    show_default=True,
    metavar="SECONDS",
    help="Between the pool's chain witness passes, which hash new events into the history's "
    "hash chain (`jobledger integrity`); 0: none here.",
)
@click.option(
    "--checkpoint-every",
    type=click.IntRange(min=1),
    default=PoolConfig.checkpoint_every,
    show_default=True,
    metavar="N",
    help="Events between two of the chain's checkpoints.",
)
@click.option(
    "--signing-key",
    type=click.Path(exists=True, dir_okay=False),
    default=None,
    metavar="FILE",
    help="Sign the chain's checkpoints with this ed25519 key (PEM; `jobledger integrity "
    "keygen`)  [default: unsigned]",
)
@json_option
@click.pass_obj
@option_group("pool_options", PoolOptions)
@option_group("run", RunOptions)
def worker(
    settings: Settings, *, app: str, pool_options: PoolOptions, run: RunOptions, as_json: bool
) -> None:
    """Run workers for the handlers registered in MODULE:ATTR."""
    registry = load_registry(app)
    selected = pool_options.selected_types(registry)
    queue_names = pool_options.queue_names()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    idle_s = worker_idle_in_transaction_s(pool_options.lease)
    with Ledger.open(settings.url, pool_size=4, idle_in_transaction_s=idle_s) as ledger:
        metrics = run.metrics_port is not None
        config = pool_options.config(types=selected, queues=queue_names, metrics=metrics)
        pool = WorkerPool(ledger, registry, config)
        in_queues = f" in queues {', '.join(queue_names)}" if queue_names else ""
        click.echo(
            f"{pool.worker_id}: {pool_options.concurrency} workers for "
            f"{', '.join(pool.types)}{in_queues} on {describe(settings.url)}",
            err=True,
        )
        stop_metrics = _serve_metrics(pool, ledger, run.metrics_port, run.metrics_addr)
        try:
            serving = pool.run_until_idle() if run.burst else _serve(pool, run.grace)
            stats = asyncio.run(serving)
        finally:
            if stop_metrics is not None:
                stop_metrics()
    if as_json:
        echo_json(plain(stats))
    else:
        click.echo(
            f"claimed {stats.claimed}, succeeded {stats.succeeded}, retried {stats.retried}, "
            f"dead {stats.dead}, released {stats.released}, lost leases {stats.fenced_out}"
        )
    dead = stats.dead if run.burst else 0
    _abandon_hung_handlers(pool, dead)
    if dead:
        raise DeadJobsError(f"{dead} job(s) ended dead")
