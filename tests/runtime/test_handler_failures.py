"""Nothing a handler does takes a worker slot down or keeps a lease alive past the job's own
timeout (defect 3 of issue 12), and a sync handler's context reports for real (defect 2)."""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable

import pytest

from ledger import FakeClock, JobStatus, Ledger
from ledger.runtime.handlers import (
    JobContext,
    PermanentError,
    Registry,
    SyncJobContext,
    TransientError,
)
from ledger.runtime.pool import WorkerPool
from ledger.testing import run_until_idle


class UnprintableError(Exception):
    """An exception whose ``str()`` itself raises (seen in the wild in C extensions)."""

    def __str__(self) -> str:
        raise RuntimeError("cannot describe myself")


def _crash_then_succeed(crash: BaseException, *, sync: bool) -> Registry:
    """``crash`` raises ``crash`` (sync or async handler); ``fine`` succeeds."""
    registry = Registry()

    def crashes_sync(ctx: SyncJobContext) -> None:
        raise crash

    async def crashes_async(ctx: JobContext) -> None:
        raise crash

    registry.handler("crash")(crashes_sync if sync else crashes_async)

    @registry.handler("fine")
    async def fine(ctx: JobContext) -> str:
        return "ok"

    return registry


async def _one_slot_until_idle(ledger: Ledger, registry: Registry) -> None:
    await asyncio.wait_for(
        run_until_idle(ledger, registry, concurrency=1, prefetch=0, poll_interval_s=0.02), 30
    )


@pytest.mark.parametrize("sync", [False, True], ids=["async", "sync"])
@pytest.mark.parametrize(
    "crash", [UnprintableError(), SystemExit(3)], ids=["unprintable", "system-exit"]
)
async def test_a_crash_around_a_handler_ends_the_attempt_as_panicked_and_the_slot_lives(
    sync_ledger: Ledger, crash: BaseException, sync: bool, caplog: pytest.LogCaptureFixture
) -> None:
    """An exception whose __str__ raises, or SystemExit, ends that attempt as panicked
    (job.handler_panic, dead-lettered), is logged, and the one slot goes on to the next job."""
    registry = _crash_then_succeed(crash, sync=sync)
    sync_ledger.define("crash")
    sync_ledger.define("fine")
    crashed = sync_ledger.enqueue("crash", priority=200).job_id
    fine = sync_ledger.enqueue("fine").job_id
    assert crashed is not None and fine is not None
    with caplog.at_level(logging.WARNING, logger="ledger.runtime"):
        await _one_slot_until_idle(sync_ledger, registry)
    state = sync_ledger.get(crashed)
    assert state is not None and state.status is JobStatus.DEAD
    assert state.last_error is not None
    assert (state.last_error.kind, state.last_error.code) == ("panicked", "job.handler_panic")
    assert type(crash).__name__ in state.last_error.message
    fine_state = sync_ledger.get(fine)
    assert fine_state is not None and fine_state.status is JobStatus.SUCCEEDED
    assert any(str(crashed) in record.getMessage() for record in caplog.records)


async def test_a_hung_handler_is_not_renewed_past_its_timeout_and_is_reaped(
    sync_ledger: Ledger, clock: FakeClock
) -> None:
    """A handler that ignores its cancellation holds its slot, but its lease is renewed only
    while the run is within the job's timeout_s; then it expires and the reaper takes it."""
    registry = Registry()
    started, let_go = asyncio.Event(), asyncio.Event()

    @registry.handler("hang")
    async def hangs(ctx: JobContext) -> None:
        started.set()
        while not let_go.is_set():
            try:
                await let_go.wait()
            except asyncio.CancelledError:
                continue  # a handler that will not be stopped

    sync_ledger.define("hang")
    job_id = sync_ledger.enqueue("hang", timeout_s=30).job_id
    assert job_id is not None
    pool = WorkerPool(
        sync_ledger,
        registry,
        concurrency=1,
        lease_s=60,
        heartbeat_interval_s=3600,  # this test beats by hand
        reaper_interval_s=0,
    )
    await pool.start()
    try:
        await asyncio.wait_for(started.wait(), 10)
        clock.advance(20)
        assert await pool._heartbeater.beat_once() == 1  # within its timeout: renewed
        clock.advance(15)  # 35 s into a 30 s timeout; the lease (renewed at 20) is still live
        assert await pool._heartbeater.beat_once() == 0
        renewals = [
            r.event.at for r in sync_ledger.history(job_id) if r.event.name == "job_heartbeated"
        ]
        assert len(renewals) == 1
        clock.advance(61)
        reaped = await asyncio.to_thread(sync_ledger.reap_expired, retry_delay_s=3600)
        assert len(reaped) == 1
        state = sync_ledger.get(job_id)
        assert state is not None and state.status is JobStatus.PENDING
        assert state.last_error is not None and state.last_error.code == "job.lease_expired"
    finally:
        let_go.set()
        await asyncio.wait_for(pool.stop(), 10)


async def test_a_sync_handlers_progress_and_heartbeat_are_recorded(sync_ledger: Ledger) -> None:
    """In a plain def handler ctx.progress()/ctx.heartbeat() block until written (they used
    to return a coroutine nobody awaited): the stage, counts and a heartbeat are recorded."""
    registry = Registry()
    threads: list[str] = []

    @registry.handler("blocking")
    def blocking(ctx: SyncJobContext) -> str:
        threads.append(threading.current_thread().name)
        ctx.progress(stage="running", done=1, total=2)
        ctx.heartbeat()
        return "done"

    sync_ledger.define("blocking")
    job_id = sync_ledger.enqueue("blocking").job_id
    assert job_id is not None
    await run_until_idle(sync_ledger, registry, concurrency=1, poll_interval_s=0.05)
    state = sync_ledger.get(job_id)
    assert state is not None and state.output == "done"
    assert (state.stage, state.progress_done, state.progress_total) == ("completed", 1, 2)
    assert threads[0].startswith("jobledger-handler")
    names = [r.event.name for r in sync_ledger.history(job_id)]
    assert names.count("job_heartbeated") == 1 and "job_progressed" in names


async def test_an_async_contexts_blocking_call_on_the_loop_is_a_clear_error(
    sync_ledger: Ledger,
) -> None:
    """progress_blocking() from an async handler (on the loop's own thread) would deadlock:
    it raises RuntimeError saying to await progress() instead, and the job fails with it."""
    registry = Registry()

    @registry.handler("wrong")
    async def wrong(ctx: JobContext) -> None:
        ctx.progress_blocking(done=1)

    sync_ledger.define("wrong")
    job_id = sync_ledger.enqueue("wrong", max_attempts=1).job_id
    assert job_id is not None
    await asyncio.wait_for(
        run_until_idle(sync_ledger, registry, concurrency=1, poll_interval_s=0.05), 30
    )
    state = sync_ledger.get(job_id)
    assert state is not None and state.last_error is not None
    assert "await ctx.progress" in state.last_error.message


@pytest.mark.parametrize(
    ("raised", "kind", "status"),
    [
        (lambda: TransientError("busy", code="bad code!"), "retryable", JobStatus.PENDING),
        (lambda: PermanentError("no", code=""), "terminal", JobStatus.DEAD),
        (lambda: TransientError("long", code="x" * 300), "retryable", JobStatus.PENDING),
    ],
    ids=["space-and-bang", "empty", "too-long"],
)
async def test_a_failure_code_the_ledger_refuses_still_records_the_failure(
    sync_ledger: Ledger, raised: Callable[[], Exception], kind: str, status: JobStatus
) -> None:
    """A handler's PermanentError/TransientError with a code the ledger would refuse does not
    make its outcome unrecordable (the job sat leased until reaped): the failure is recorded
    at once with its kind, code job.invalid_failure_code, and the handler's code named in the
    message."""
    registry = Registry()

    @registry.handler("t")
    async def fails(ctx: JobContext) -> None:
        raise raised()

    sync_ledger.define("t", max_attempts=3)
    job_id = sync_ledger.enqueue("t").job_id
    assert job_id is not None
    await _one_slot_until_idle(sync_ledger, registry)
    state = sync_ledger.get(job_id)
    assert state is not None and state.status is status and state.lease is None
    assert state.last_error is not None
    assert (state.last_error.kind, state.last_error.code) == (kind, "job.invalid_failure_code")
    assert "failure code" in state.last_error.message
