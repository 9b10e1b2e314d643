"""The worker pool beyond the seed: batch completer, heartbeat loop, timeouts, handler
kinds, burst mode, and cross-process wake-up on PostgreSQL."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
import time
from collections.abc import Awaitable, Callable
from typing import Any

from ledger import EnqueueRequest, FakeClock, JobStatus, Ledger, Subject
from ledger.api.ledger import Completion
from ledger.runtime.breaker import CircuitBreaker
from ledger.runtime.completer import BatchCompleter
from ledger.runtime.executor import classify
from ledger.runtime.handlers import JobContext, Registry, SyncJobContext
from ledger.runtime.health import PoolStats
from ledger.runtime.heartbeater import Heartbeater
from ledger.runtime.pool import WorkerPool
from ledger.runtime.threads import ThreadLane
from ledger.testing import drain, run_until_idle, sync_definitions

MakePool = Callable[..., WorkerPool]
DrainQueue = Callable[..., Awaitable[PoolStats]]


def gathering_pool(sync_ledger: Ledger, **settings: Any) -> tuple[WorkerPool, list[int]]:
    """60 jobs of a fast async handler and a pool whose completer would gather their
    outcomes for 30 s; the list the handler notes each run in."""
    registry = Registry()
    ran: list[int] = []

    @registry.handler("fast")
    async def fast(ctx: JobContext) -> int:
        ran.append(ctx.payload["i"])
        return int(ctx.payload["i"])

    sync_ledger.define("fast")
    sync_ledger.enqueue_many([EnqueueRequest(job_type="fast", payload={"i": i}) for i in range(60)])
    pool = WorkerPool(
        sync_ledger,
        registry,
        concurrency=4,
        prefetch=60,
        completion_delay_s=30.0,
        completion_batch=10_000,
        poll_interval_s=0.05,
        **settings,
    )
    return pool, ran


async def test_stop_flushes_every_batched_completion(sync_ledger: Ledger) -> None:
    """With a long flush delay, stop() still records every finished job: none is lost. (The
    depth holds all 60 with room to spare: a finished job keeps its room until its outcome is
    recorded, and a pool with no room left records at once, having nothing else to gather.
    Starts counted by the claim: a start write of its own would carry the outcomes.)"""
    pool, ran = gathering_pool(sync_ledger, exact_starts=False)
    await pool.start()
    while len(ran) < 60:
        await asyncio.sleep(0.01)
    assert pool.stats.succeeded == 0  # all 60 still gathering
    await asyncio.wait_for(pool.stop(), timeout=10)
    assert sync_ledger.counts() == {"succeeded": 60}
    assert pool.stats.succeeded == 60


async def test_start_writes_carry_the_outcomes_gathered_meanwhile(sync_ledger: Ledger) -> None:
    """A buffered job's start write takes the outcomes the completer has gathered, so they
    do not wait out ``completion_delay_s``: when the last handler has run, at most the jobs
    that ran after the last start write (one per slot) are still gathering; stop() records
    those."""
    pool, ran = gathering_pool(sync_ledger)
    await pool.start()
    while len(ran) < 60:
        await asyncio.sleep(0.01)
    assert pool.stats.succeeded >= 60 - 4
    await asyncio.wait_for(pool.stop(), timeout=10)
    assert sync_ledger.counts() == {"succeeded": 60}
    assert pool.stats.succeeded == 60
    assert sync_ledger.projections().verify().clean


async def test_a_pool_holding_only_finished_outcomes_records_them_without_the_delay(
    sync_ledger: Ledger,
) -> None:
    """Once every lease the pool holds is a finished job's outcome and it has no room to
    claim, the completer writes them at once instead of waiting out ``completion_delay_s``
    (nothing could join them): four rounds of a full depth finish well inside one delay."""
    registry = Registry()

    @registry.handler("fast")
    async def fast(ctx: JobContext) -> None:
        return None

    sync_ledger.define("fast")
    sync_ledger.enqueue_many([EnqueueRequest(job_type="fast") for _ in range(16)])
    pool = WorkerPool(
        sync_ledger,
        registry,
        concurrency=4,
        prefetch=0,
        completion_delay_s=30.0,
        poll_interval_s=0.05,
    )
    stats = await asyncio.wait_for(pool.run_until_idle(), timeout=20)
    assert stats.succeeded == 16
    assert sync_ledger.counts() == {"succeeded": 16}


async def test_a_fenced_out_completion_appends_nothing(sync_ledger: Ledger) -> None:
    """The completer drops an outcome whose lease is gone and records the others."""
    sync_ledger.define("t")
    sync_ledger.enqueue_many([EnqueueRequest(job_type="t") for _ in range(2)])
    jobs = sync_ledger.claim("w", limit=2)
    leases = [job.lease for job in jobs if job.lease is not None]
    # Released, not cancelled: a cancelled job's outcome records job_handler_stopped
    # (tests/runtime/test_cancel_running.py).
    sync_ledger.release(leases[1])
    before = sync_ledger.store.head_position()
    completer = BatchCompleter(sync_ledger)
    completer.start()
    first = completer.submit(Completion(leases[0], output="ok"))
    second = completer.submit(Completion(leases[1], output="late"))
    await completer.close()
    recorded, dropped = first.result(), second.result()
    assert recorded is not None and recorded.status is JobStatus.SUCCEEDED
    assert dropped is None
    assert sync_ledger.store.head_position() == before + 1


async def test_heartbeat_loop_renews_every_held_lease_and_reports_lost_ones(
    sync_ledger: Ledger, clock: FakeClock
) -> None:
    """One pass renews all held leases (one event each); a cancelled job's is reported lost."""
    sync_ledger.define("t")
    sync_ledger.enqueue_many([EnqueueRequest(job_type="t") for _ in range(3)])
    leases = [j.lease for j in sync_ledger.claim("w", limit=3, lease_s=10) if j.lease]
    sync_ledger.cancel(leases[2].job_id)
    lost: list[Any] = []
    held = list(leases)
    beater = Heartbeater(
        sync_ledger,
        lambda: held,
        lease_s=10,
        interval_s=3600,
        on_lost=lost.append,
        io=ThreadLane(1, "test-io"),
    )
    clock.advance(5)
    before = sync_ledger.store.head_position()
    assert await beater.beat_once() == 2
    assert lost == [leases[2].job_id]
    assert sync_ledger.store.head_position() == before + 2
    for lease in leases[:2]:
        state = sync_ledger.get(lease.job_id)
        assert state is not None and state.last_heartbeat_at == clock.now()


async def test_a_handler_past_its_timeout_fails_as_timeout(sync_ledger: Ledger) -> None:
    """The per-job timeout cancels the handler and records kind timeout, retryable."""
    registry = Registry()

    @registry.handler("slow", timeout_s=0.05)
    async def slow(ctx: JobContext) -> None:
        await asyncio.sleep(10)

    await asyncio.to_thread(sync_definitions, sync_ledger, registry)
    job_id = sync_ledger.enqueue("slow").job_id
    assert job_id is not None
    await drain(sync_ledger, registry, concurrency=1)
    state = sync_ledger.get(job_id)
    assert state is not None and state.status is JobStatus.PENDING
    assert state.last_error is not None
    assert (state.last_error.kind, state.last_error.code) == ("timeout", "job.timeout_exceeded")


async def test_a_job_without_a_handler_dies_as_not_registered(
    sync_ledger: Ledger, drain_queue: DrainQueue
) -> None:
    """A claimed job whose type has no handler is a terminal job.handler_not_registered."""
    sync_ledger.define("orphan")
    job_id = sync_ledger.enqueue("orphan").job_id
    await drain_queue(types=["orphan"])
    state = sync_ledger.get(job_id)  # type: ignore[arg-type]
    assert state is not None and state.status is JobStatus.DEAD
    assert state.last_error is not None
    assert state.last_error.code == "job.handler_not_registered"


async def test_an_output_that_is_not_json_fails_only_its_own_job(sync_ledger: Ledger) -> None:
    """A handler returning a non-JSON value dies as job.invalid_output; others succeed."""
    registry = Registry()

    @registry.handler("odd")
    async def odd(ctx: JobContext) -> object:
        return object() if ctx.payload["bad"] else {"fine": True}

    sync_ledger.define("odd")
    bad = sync_ledger.enqueue("odd", {"bad": True}).job_id
    good = sync_ledger.enqueue("odd", {"bad": False}).job_id
    await run_until_idle(sync_ledger, registry, concurrency=2, poll_interval_s=0.05)
    bad_state, good_state = sync_ledger.get(bad), sync_ledger.get(good)  # type: ignore[arg-type]
    assert bad_state is not None and bad_state.status is JobStatus.DEAD
    assert bad_state.last_error is not None and bad_state.last_error.code == "job.invalid_output"
    assert good_state is not None and good_state.output == {"fine": True}


async def test_sync_handlers_run_in_a_thread_and_can_report_progress(sync_ledger: Ledger) -> None:
    """A plain def handler runs off the loop and reports progress with the blocking API."""
    registry = Registry()
    threads: list[str] = []

    @registry.handler("blocking")
    def blocking(ctx: SyncJobContext) -> str:
        import threading

        threads.append(threading.current_thread().name)
        ctx.progress_blocking(stage="running", done=1, total=2)
        ctx.heartbeat_blocking()
        return "done"

    sync_ledger.define("blocking")
    job_id = sync_ledger.enqueue("blocking").job_id
    await run_until_idle(sync_ledger, registry, concurrency=1, poll_interval_s=0.05)
    state = sync_ledger.get(job_id)  # type: ignore[arg-type]
    assert state is not None and state.output == "done" and state.progress_total == 2
    assert threads and threads[0] != "MainThread"
    kinds = [r.event.name for r in sync_ledger.history(job_id)]  # type: ignore[arg-type]
    assert "job_stage_changed" in kinds and "job_heartbeated" in kinds


async def test_burst_mode_works_until_idle_and_counts_outcomes(
    sync_ledger: Ledger, make_pool: MakePool, downstream: Any
) -> None:
    """run_until_idle processes what is due, then stops; stats count the outcomes."""
    from ledger.runtime.handlers import PermanentError

    sync_ledger.enqueue_many(
        [
            EnqueueRequest(job_type="ingest", subject=Subject(source_id="s", uri=f"u{i}"))
            for i in range(7)
        ]
    )
    stats = await make_pool(concurrency=3).run_until_idle()
    assert stats.succeeded == 7 and stats.dead == 0
    downstream.raises = PermanentError("no")
    sync_ledger.enqueue("ingest", subject=Subject(source_id="s", uri="bad"))
    stats = await make_pool(concurrency=3).run_until_idle()
    assert stats.dead == 1


def test_breaker_opens_at_threshold_probes_after_cooldown_and_reopens_at_once() -> None:
    """Counting, cooldown, success closing it and one failure after cooldown reopening."""
    clock = FakeClock()
    breaker = CircuitBreaker(clock, threshold=3, cooldown_s=60)
    for _ in range(2):
        breaker.record_failure("t")
    assert not breaker.is_open("t")
    breaker.record_failure("t")
    assert breaker.is_open("t") and breaker.open_types()["t"] == clock.now() + breaker.cooldown
    clock.advance(60)
    assert not breaker.is_open("t")  # half-open: a probe may run
    breaker.record_failure("t")
    assert breaker.is_open("t")  # one more failure reopens at once
    clock.advance(60)
    breaker.record_success("t")
    assert not breaker.is_open("t") and breaker.consecutive_failures("t") == 0


def test_shutdown_signals_are_never_classified_and_system_exit_is_a_panic() -> None:
    """KeyboardInterrupt and CancelledError propagate; SystemExit from a handler is a crash
    of the handler (panicked); other errors classify."""
    assert classify(KeyboardInterrupt()) is None
    assert classify(asyncio.CancelledError()) is None
    exited = classify(SystemExit(2))
    assert exited is not None and (exited.kind, exited.code) == ("panicked", "job.handler_panic")
    failure = classify(ValueError("x"))
    assert failure is not None and failure.kind == "retryable"


WORKER_SCRIPT = textwrap.dedent(
    """
    import asyncio, sys, time
    from ledger import Ledger
    from ledger.runtime.handlers import Registry
    from ledger.runtime.pool import WorkerPool

    registry = Registry()

    @registry.handler("wake")
    async def wake(ctx):
        return {"started_at": time.time()}

    async def main():
        with Ledger.open(sys.argv[1], pool_size=4) as ledger:
            pool = WorkerPool(ledger, registry, concurrency=1, poll_interval_s=30.0)
            await pool.start()
            print("ready", flush=True)
            await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
            await pool.stop()

    asyncio.run(main())
    """
)


def test_a_worker_in_another_process_wakes_well_before_its_poll_interval(pg_url: str) -> None:
    """PostgreSQL LISTEN/NOTIFY: a job enqueued here starts in the other process within
    seconds although that process polls only every 30 s."""
    with Ledger.open(pg_url) as ledger:
        ledger.define("wake")
    worker = subprocess.Popen(
        [sys.executable, "-c", WORKER_SCRIPT, pg_url],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert worker.stdout is not None and worker.stdout.readline().strip() == "ready"
        with Ledger.open(pg_url) as ledger:
            enqueued_at = time.time()  # noqa: TID251 - compared across processes: wall time
            job_id = ledger.enqueue("wake").job_id
            assert job_id is not None
            deadline = time.monotonic() + 10
            state = ledger.get(job_id)
            while (state is None or state.status != "succeeded") and time.monotonic() < deadline:
                time.sleep(0.02)
                state = ledger.get(job_id)
        assert state is not None and state.status == "succeeded"
        latency = state.output["started_at"] - enqueued_at  # type: ignore[index]
        assert latency < 5.0, f"woke after {latency:.2f} s; the poll interval is 30 s"
    finally:
        if worker.stdin is not None:
            worker.stdin.write("\n")
            worker.stdin.flush()
        worker.wait(timeout=20)
    assert worker.returncode == 0


async def test_a_handlers_progress_leaves_the_job_row_behind_on_postgresql(
    pg_url: str, clock: FakeClock
) -> None:
    """The pool decides each report on the state its last write returned and, on
    PostgreSQL, writes it as events alone: inside the handler the job's row is still at its
    start's version after two reports (each as the stream says when read through the
    ledger); the outcome catches the row up, and verify is clean."""
    import psycopg

    registry = Registry()
    seen: list[tuple[int, int, int | None]] = []

    def row_version(job_id: object) -> int:
        with psycopg.connect(pg_url) as conn:
            [(version,)] = conn.execute(
                "SELECT version FROM jl_queue WHERE job_id = %s", [job_id]
            ).fetchall()
        return int(version)

    with Ledger.open(pg_url, clock=clock) as ledger:

        @registry.handler("reports")
        async def reports(ctx: JobContext) -> str:
            for done in (1, 2):
                await ctx.progress(stage=f"step {done}", done=done, total=2)
                state = ledger.get(ctx.id)
                assert state is not None
                seen.append((row_version(ctx.id), state.version, state.progress_done))
            return "done"

        ledger.define("reports")
        job_id = ledger.enqueue("reports").job_id
        await run_until_idle(ledger, registry, concurrency=1, poll_interval_s=0.05)
        final = ledger.get(job_id)
        assert final is not None and final.output == "done"
        [(row_1, stream_1, done_1), (row_2, stream_2, done_2)] = seen
        assert row_1 == row_2 < stream_1 < stream_2  # the reports did not rewrite the row
        assert (done_1, done_2) == (1, 2)
        assert row_version(job_id) == final.version == len(ledger.history(job_id))
        assert ledger.projections().verify().clean
