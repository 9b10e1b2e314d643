"""An equivalent of every test in haiku.rag's worker-pool tests (seeds/haiku_rag_test_workers),
on the event-sourced ledger, on SQLite and PostgreSQL.

Where a seed test edits rows to move time, these move the injectable clock; where it runs the
processing logic deterministically, these use :mod:`ledger.testing` (``drain``, ``work_job``);
where it reaches into private state, these use the pool's clearly-internal hooks
(``_workers``, ``_releaser``). Wall-clock waits appear only where the behaviour is about real
time (wake-up, shutdown), with generous bounds.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from ledger import (
    FakeClock,
    JobStatus,
    Ledger,
    Subject,
    SubjectOp,
)
from ledger.runtime.breaker import CircuitBreaker
from ledger.runtime.handlers import JobContext, PermanentError, Registry, TransientError
from ledger.runtime.health import PoolStats
from ledger.runtime.pool import WorkerPool, process_worker_id
from ledger.testing import work_job
from ledger.views.dead_letters import PROJECTION as DEAD_LETTERS

INGEST = "ingest"
MakePool = Callable[..., WorkerPool]
DrainQueue = Callable[..., Awaitable[PoolStats]]


def subject(
    uri: str = "u", op: SubjectOp = SubjectOp.UPSERT, revision: str | None = None
) -> Subject:
    return Subject(source_id="src", uri=uri, op=op, revision=revision)


async def eventually(check: Callable[[], Awaitable[bool]], timeout: float = 5.0) -> bool:
    """Poll ``check`` until true or ``timeout`` seconds pass (real time)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while loop.time() < deadline:
        if await check():
            return True
        await asyncio.sleep(0.02)
    return await check()


def dead_letter_rows(ledger: Ledger) -> set[Any]:
    """The job ids of the dead-letter view's rows, read from its table."""
    with ledger.store.read_snapshot() as tables:
        return {row["job_id"] for row in tables.live_rows(DEAD_LETTERS)}


def status_of(ledger: Ledger, job_id: Any) -> JobStatus:
    state = ledger.get(job_id)
    assert state is not None
    return state.status


# --- event-driven wake-up ------------------------------------------------------------------


async def test_seed_idle_worker_picks_up_job_quickly(
    sync_ledger: Ledger, make_pool: MakePool
) -> None:
    """An idle worker wakes on enqueue well before its 5 s poll interval: the pool is idle
    (its claim found nothing, it waits out the poll) before the job is enqueued, so only a
    wake-up can start the job in time."""
    pool = make_pool(concurrency=1, poll_interval_s=5.0)
    await pool.start()
    await asyncio.wait_for(pool.wait_until_idle(), 2.0)
    job_id = (await asyncio.to_thread(sync_ledger.enqueue, INGEST, subject=subject())).job_id

    async def done() -> bool:
        return status_of(sync_ledger, job_id) is JobStatus.SUCCEEDED

    assert await eventually(done, timeout=2.5), "job was not picked up within 2.5 s"
    await pool.stop()


async def test_seed_stop_completes_with_idle_workers(make_pool: MakePool) -> None:
    """stop() wakes workers parked on an empty queue; they exit promptly."""
    pool = make_pool(concurrency=2, poll_interval_s=10.0)
    await pool.start()
    await asyncio.sleep(0.1)
    await asyncio.wait_for(pool.stop(), timeout=2.0)
    assert pool.live_workers == 0


# --- ledger.testing.drain: the processing logic, deterministically --------------------------


async def test_seed_drain_marks_job_succeeded_and_writes_sync_state(
    sync_ledger: Ledger, drain_queue: DrainQueue, downstream: Any
) -> None:
    """Success: status succeeded, and the sync state records the *result's* revision."""
    downstream.revision, downstream.content_hash = "e1", "m1"
    job_id = sync_ledger.enqueue(INGEST, subject=subject("s3://b/k.md", revision="e0")).job_id
    assert (await drain_queue()).claimed == 1
    assert status_of(sync_ledger, job_id) is JobStatus.SUCCEEDED
    assert sync_ledger.sources.revision_snapshot("src") == {"s3://b/k.md": "e1"}


async def test_seed_drain_delete_op_removes_sync_state(
    sync_ledger: Ledger, drain_queue: DrainQueue, downstream: Any
) -> None:
    """A delete job runs the delete downstream and removes the subject's sync state."""
    downstream.revision = "e1"
    sync_ledger.enqueue(INGEST, subject=subject("s3://b/k.md"))
    await drain_queue()
    assert sync_ledger.sources.revision_snapshot("src") == {"s3://b/k.md": "e1"}
    job_id = sync_ledger.enqueue(INGEST, subject=subject("s3://b/k.md", SubjectOp.DELETE)).job_id
    await drain_queue()
    assert status_of(sync_ledger, job_id) is JobStatus.SUCCEEDED
    assert downstream.deleted == ["s3://b/k.md"]
    assert sync_ledger.sources.revision_snapshot("src") == {}


async def test_seed_successful_delete_prunes_dead_jobs_for_same_uri(
    sync_ledger: Ledger, drain_queue: DrainQueue
) -> None:
    """Once a delete resolves a URI, the earlier dead upsert's dead-letter row is gone, and a
    rebuild from the history prunes it the same way."""
    from ledger import Failure, FailureKind

    upsert = sync_ledger.enqueue(INGEST, subject=subject("file:///gone.md")).job_id
    [claimed] = sync_ledger.claim("prev-worker")
    assert claimed.lease is not None
    missing = Failure(kind=FailureKind.TERMINAL, code="doc.missing", message="File does not exist")
    sync_ledger.fail(claimed.lease, missing)
    assert status_of(sync_ledger, upsert) is JobStatus.DEAD
    assert [d.job_id for d in sync_ledger.dead_letters()] == [upsert]
    assert dead_letter_rows(sync_ledger) == {upsert}

    delete = sync_ledger.enqueue(
        INGEST, subject=subject("file:///gone.md", SubjectOp.DELETE)
    ).job_id
    await drain_queue()
    assert status_of(sync_ledger, delete) is JobStatus.SUCCEEDED
    assert sync_ledger.dead_letters() == []
    # The stale dead upsert's row is gone from the dead-letter view (its history stays), and
    # a rebuild from the history prunes it the same way.
    assert upsert not in dead_letter_rows(sync_ledger)
    sync_ledger.projections().rebuild([DEAD_LETTERS.name])
    assert upsert not in dead_letter_rows(sync_ledger)
    assert sync_ledger.dead_letters() == []


async def test_seed_permanent_error_marks_dead_no_reschedule(
    sync_ledger: Ledger, drain_queue: DrainQueue, downstream: Any
) -> None:
    """PermanentError: dead at once with its message; no sync state is written."""
    downstream.raises = PermanentError("unsupported")
    job_id = sync_ledger.enqueue(INGEST, subject=subject("https://x/y.bin")).job_id
    await drain_queue()
    state = sync_ledger.get(job_id)  # type: ignore[arg-type]
    assert state is not None and state.status is JobStatus.DEAD
    assert state.last_error is not None and state.last_error.message == "unsupported"
    assert sync_ledger.sources.revision_snapshot("src") == {}


async def test_seed_transient_error_reschedules_below_max_attempts(
    sync_ledger: Ledger, drain_queue: DrainQueue, downstream: Any
) -> None:
    """TransientError below max attempts: pending again, later, attempt kept, error kept."""
    downstream.raises = TransientError("blip")
    job_id = sync_ledger.enqueue(INGEST, subject=subject(), max_attempts=3).job_id
    assert job_id is not None
    before = sync_ledger.get(job_id)
    assert before is not None
    assert (await drain_queue()).claimed == 1  # the 60 s backoff keeps it from re-running
    state = sync_ledger.get(job_id)
    assert state is not None and state.status is JobStatus.PENDING
    assert state.last_error is not None and state.last_error.message == "blip"
    assert state.attempt == 1
    assert state.run_at > before.run_at


async def test_seed_transient_error_at_max_attempts_marks_dead(
    sync_ledger: Ledger, drain_queue: DrainQueue, downstream: Any
) -> None:
    """max_attempts=1: the first transient failure is the last."""
    downstream.raises = TransientError("blip")
    job_id = sync_ledger.enqueue(INGEST, subject=subject(), max_attempts=1).job_id
    await drain_queue()
    state = sync_ledger.get(job_id)  # type: ignore[arg-type]
    assert state is not None and state.status is JobStatus.DEAD and state.attempt == 1


async def test_seed_unknown_exception_caught_and_marked_dead(
    sync_ledger: Ledger, drain_queue: DrainQueue, downstream: Any
) -> None:
    """An unrecognised Exception is treated as transient: it flows to retry/dead letter."""

    class WeirdError(Exception):
        pass

    downstream.raises = WeirdError("surprise")
    job_id = sync_ledger.enqueue(INGEST, subject=subject(), max_attempts=1).job_id
    tasks_before = asyncio.all_tasks()
    await drain_queue()
    state = sync_ledger.get(job_id)  # type: ignore[arg-type]
    assert state is not None and state.status is JobStatus.DEAD
    assert state.last_error is not None and "WeirdError: surprise" in state.last_error.message
    assert asyncio.all_tasks() <= tasks_before  # drain ran on the caller's task; nothing crashed


async def test_seed_keyboard_interrupt_propagates_not_classified(
    sync_ledger: Ledger, drain_queue: DrainQueue, downstream: Any
) -> None:
    """KeyboardInterrupt is the runtime's own signal: it propagates; the job stays leased."""
    downstream.raises = KeyboardInterrupt("ctrl-c")
    job_id = sync_ledger.enqueue(INGEST, subject=subject()).job_id
    with pytest.raises(KeyboardInterrupt):
        await drain_queue()
    assert status_of(sync_ledger, job_id) is JobStatus.LEASED


async def test_seed_drain_passes_configured_sources_to_client(
    sync_ledger: Ledger, drain_queue: DrainQueue, downstream: Any
) -> None:
    """What the pool is configured with (here: authenticated sources) reaches the handler."""
    configured = {"source_id": "urls", "headers": {"Authorization": "Bearer abc"}}
    sync_ledger.enqueue(INGEST, subject=subject("https://example.com/x"))
    await drain_queue(resources={"sources": [configured]})
    [ctx] = downstream.calls
    assert ctx.resources["sources"] == [configured]


# --- start / stop lifecycle -----------------------------------------------------------------


async def test_seed_workers_drain_queue_after_start(
    sync_ledger: Ledger, make_pool: MakePool
) -> None:
    """Three started workers finish five queued jobs."""
    for i in range(5):
        sync_ledger.enqueue(INGEST, subject=subject(f"u{i}"))
    pool = make_pool(concurrency=3)
    await pool.start()

    async def all_done() -> bool:
        return sync_ledger.counts().get("succeeded", 0) == 5

    assert await eventually(all_done)
    await pool.stop()
    assert sync_ledger.counts() == {"succeeded": 5}


async def test_seed_shutdown_grace_lets_inflight_job_complete(
    sync_ledger: Ledger, make_pool: MakePool, downstream: Any
) -> None:
    """A job in flight when stop() is called finishes before stop() returns."""
    started, finished = asyncio.Event(), asyncio.Event()

    async def slow_then_finish(ctx: JobContext) -> dict[str, str]:
        started.set()
        await asyncio.sleep(0.1)
        finished.set()
        return {"doc": "d"}

    downstream.custom = slow_then_finish
    sync_ledger.enqueue(INGEST, subject=subject())
    pool = make_pool(concurrency=1)
    await pool.start()
    await asyncio.wait_for(started.wait(), timeout=5.0)
    await asyncio.wait_for(pool.stop(), timeout=5.0)
    assert finished.is_set()
    assert sync_ledger.counts() == {"succeeded": 1}


async def _start_hanging_job(
    sync_ledger: Ledger, make_pool: MakePool, downstream: Any
) -> tuple[WorkerPool, Any, asyncio.Event]:
    started, cancelled = asyncio.Event(), asyncio.Event()

    async def hangs_forever(ctx: JobContext) -> None:
        started.set()
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    downstream.custom = hangs_forever
    job_id = sync_ledger.enqueue(INGEST, subject=subject()).job_id
    pool = make_pool(concurrency=1)
    await pool.start()
    await asyncio.wait_for(started.wait(), timeout=5.0)
    return pool, job_id, cancelled


async def test_seed_shutdown_grace_timeout_releases_claim(
    sync_ledger: Ledger, make_pool: MakePool, downstream: Any
) -> None:
    """Grace elapsed: the worker is cancelled mid-job and the claim goes straight back to
    pending, the attempt not consumed — no waiting for the reaper."""
    pool, job_id, cancelled = await _start_hanging_job(sync_ledger, make_pool, downstream)
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(pool.stop(), timeout=0.2)
    assert cancelled.is_set()
    state = sync_ledger.get(job_id)
    assert state is not None and state.status is JobStatus.PENDING
    assert state.worker_id is None and state.attempt == 0


async def test_seed_stop_grace_s_running_out_releases_in_flight_jobs(
    sync_ledger: Ledger, make_pool: MakePool, downstream: Any
) -> None:
    """stop(grace_s=…) whose grace runs out returns by itself: the in-flight job is cancelled
    and released (job_released), pending again with its attempt not consumed."""
    pool, job_id, cancelled = await _start_hanging_job(sync_ledger, make_pool, downstream)
    await asyncio.wait_for(pool.stop(grace_s=0.1), timeout=10.0)
    assert cancelled.is_set() and pool.live_workers == 0
    state = sync_ledger.get(job_id)
    assert state is not None and state.status is JobStatus.PENDING
    assert state.worker_id is None and state.attempt == 0
    assert [r.event.name for r in sync_ledger.history(job_id)][-1] == "job_released"
    assert pool.stats.released == 1


async def test_seed_worker_loses_claim_to_reaper_does_not_write_sync_state(
    sync_ledger: Ledger, registry: Registry, clock: FakeClock, downstream: Any
) -> None:
    """A's lease is reaped and B re-claims: A's late success changes nothing, and the sync
    state stays untouched (it is written only from an appended job_succeeded)."""
    downstream.revision = "A"
    job_id = sync_ledger.enqueue(INGEST, subject=subject()).job_id
    [claimed_by_a] = sync_ledger.claim("worker-A", lease_s=10)
    clock.advance(11)
    sync_ledger.reap_expired(retry_delay_s=0)
    [claimed_by_b] = sync_ledger.claim("worker-B")
    before = sync_ledger.store.head_position()

    assert await work_job(sync_ledger, registry, claimed_by_a) is None  # refused by the fence

    state = sync_ledger.get(job_id)  # type: ignore[arg-type]
    assert state is not None and state.status is JobStatus.LEASED
    assert state.worker_id == "worker-B" and state == claimed_by_b
    assert sync_ledger.store.head_position() == before
    assert sync_ledger.sources.revision_snapshot("src") == {}


def _held_release(
    pool: WorkerPool,
) -> tuple[asyncio.Event, asyncio.Event, asyncio.Event, Callable[..., Awaitable[None]]]:
    """A release that, once entered, waits for ``proceed`` (set by the test after the second
    cancel has landed), so the second cancel arrives mid-release by construction."""
    entered, proceed, done = asyncio.Event(), asyncio.Event(), asyncio.Event()
    real_release = pool._releaser.release

    async def held_release(lease: Any) -> None:
        entered.set()
        await proceed.wait()
        await real_release(lease)
        done.set()

    return entered, proceed, done, held_release


async def test_seed_cancel_cleanup_survives_second_cancel(
    sync_ledger: Ledger, make_pool: MakePool, downstream: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A second cancel during the release cannot strand the claim: the shielded release
    finishes as an orphan task."""
    pool, job_id, _ = await _start_hanging_job(sync_ledger, make_pool, downstream)
    entered, proceed, done, held_release = _held_release(pool)
    monkeypatch.setattr(pool._releaser, "release", held_release)
    worker = pool._workers[0]
    worker.cancel()
    await asyncio.wait_for(entered.wait(), timeout=5.0)
    worker.cancel()
    with pytest.raises(asyncio.CancelledError):
        await worker  # the worker is gone; its release is still held mid-way
    assert not done.is_set() and pool._releaser.pending == 1
    proceed.set()
    await asyncio.wait_for(done.wait(), timeout=5.0)
    await pool.stop()
    state = sync_ledger.get(job_id)
    assert state is not None and state.status is JobStatus.PENDING and state.worker_id is None


async def test_seed_wait_for_pending_releases_waits_for_orphan_releases(
    sync_ledger: Ledger, make_pool: MakePool, downstream: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After a double cancel the release is an orphan; the releaser's wait_for_pending waits
    for it and reports how many landed."""
    pool, job_id, _ = await _start_hanging_job(sync_ledger, make_pool, downstream)
    entered, proceed, _, held_release = _held_release(pool)
    monkeypatch.setattr(pool._releaser, "release", held_release)
    worker = pool._workers[0]
    worker.cancel()
    await asyncio.wait_for(entered.wait(), timeout=5.0)
    worker.cancel()
    with pytest.raises(asyncio.CancelledError):
        await worker
    assert pool._releaser.pending == 1
    assert await pool._releaser.wait_for_pending(timeout=0) == 0  # still held: none landed
    proceed.set()
    assert await pool._releaser.wait_for_pending(timeout=5.0) == 1
    assert pool._releaser.pending == 0
    await pool.stop()
    assert status_of(sync_ledger, job_id) is JobStatus.PENDING


async def test_seed_wait_for_pending_releases_with_no_orphans_is_noop(
    make_pool: MakePool,
) -> None:
    """Nothing to wait for: returns 0 at once."""
    assert await make_pool(concurrency=1)._releaser.wait_for_pending() == 0


async def test_seed_live_workers_drops_when_a_worker_finishes(make_pool: MakePool) -> None:
    """A finished (crashed or cancelled) worker no longer counts, and health says so."""
    pool = make_pool(concurrency=2)
    await pool.start()
    assert pool.live_workers == 2 and pool.health().status == "ok"
    pool._workers[0].cancel()
    await asyncio.gather(pool._workers[0], return_exceptions=True)
    assert pool.live_workers == 1
    health = pool.health()
    assert health.status == "degraded" and "1 of 2 workers alive" in health.reasons
    await pool.stop()


async def test_seed_double_start_raises(make_pool: MakePool) -> None:
    """start() on a started pool raises."""
    pool = make_pool(concurrency=1)
    await pool.start()
    with pytest.raises(RuntimeError, match="already started"):
        await pool.start()
    await pool.stop()


# --- the circuit breaker (per job type; the seed has a single type) -------------------------


async def test_seed_breaker_opens_after_n_consecutive_transient_failures(
    sync_ledger: Ledger, make_pool: MakePool, downstream: Any, clock: FakeClock
) -> None:
    """Through the running pool: exactly the threshold's worth of jobs fail, then the breaker
    is open, the pool is degraded and the remaining jobs stay queued, never attempted."""
    downstream.raises = TransientError("downstream down")
    ids = [
        sync_ledger.enqueue(INGEST, subject=subject(f"u{i}"), max_attempts=5).job_id
        for i in range(8)
    ]
    pool = make_pool(concurrency=1, prefetch=0, poll_interval_s=0.02)
    await pool.start()
    await asyncio.wait_for(pool.wait_until_idle(), 10)
    threshold = pool.breaker.threshold
    assert threshold == 5
    attempts = sorted((sync_ledger.get(i).attempt for i in ids), reverse=True)  # type: ignore[union-attr, arg-type]
    assert attempts == [1] * threshold + [0] * (len(ids) - threshold)
    assert sync_ledger.counts() == {"pending": len(ids)}
    assert pool.breaker_open is True
    health = pool.health()
    assert health.status == "degraded" and list(health.open_breakers) == [INGEST]
    await pool.stop()


async def test_seed_breaker_pauses_worker_loop_claims(
    sync_ledger: Ledger, make_pool: MakePool
) -> None:
    """With the breaker open, a live worker does not claim a queued job (it goes idle)."""
    breaker = CircuitBreaker(sync_ledger.clock)
    pool = make_pool(concurrency=1, poll_interval_s=0.02, breaker=breaker)
    for _ in range(10):
        breaker.record_failure(INGEST)
    assert pool.breaker_open is True
    job_id = sync_ledger.enqueue(INGEST, subject=subject()).job_id
    await pool.start()
    await asyncio.wait_for(pool.wait_until_idle(), 5)  # a claim ran and left the type out
    assert status_of(sync_ledger, job_id) is JobStatus.PENDING
    await pool.stop()


async def test_seed_breaker_closes_on_successful_probe(
    sync_ledger: Ledger, make_pool: MakePool, clock: FakeClock
) -> None:
    """After the cooldown the running pool claims again; the probe's success clears it."""
    breaker = CircuitBreaker(clock)
    pool = make_pool(concurrency=1, poll_interval_s=0.02, breaker=breaker)
    for _ in range(10):
        breaker.record_failure(INGEST)
    assert pool.breaker_open is True
    clock.advance(breaker.cooldown.total_seconds())
    assert pool.breaker_open is False
    job_id = sync_ledger.enqueue(INGEST, subject=subject()).job_id
    await pool.start()
    await asyncio.wait_for(pool.wait_until_idle(), 5)
    assert status_of(sync_ledger, job_id) is JobStatus.SUCCEEDED
    assert breaker.consecutive_failures(INGEST) == 0
    await pool.stop()


async def test_seed_breaker_ignores_permanent_errors(
    sync_ledger: Ledger, make_pool: MakePool, downstream: Any
) -> None:
    """Permanent errors are about one job, not downstream: they neither count nor open, so
    the running pool works every job."""
    downstream.raises = PermanentError("bad URI")
    pool = make_pool(concurrency=1, prefetch=0, poll_interval_s=0.02)
    for i in range(pool.breaker.threshold + 2):
        sync_ledger.enqueue(INGEST, subject=subject(f"u{i}"))
    await pool.start()
    await asyncio.wait_for(pool.wait_until_idle(), 10)
    assert sync_ledger.counts() == {"dead": pool.breaker.threshold + 2}
    assert pool.breaker_open is False
    assert pool.breaker.consecutive_failures(INGEST) == 0
    await pool.stop()


# --- the reaper -----------------------------------------------------------------------------


def _dead_pid() -> int:
    """The pid of a process that has exited."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


async def test_seed_boot_reap_resets_pre_existing_claims(
    sync_ledger: Ledger, make_pool: MakePool
) -> None:
    """Claims left by a killed process of this pool go back to pending at start(), attempt
    not consumed, without waiting for their leases to expire."""
    job_id = sync_ledger.enqueue(INGEST, subject=subject()).job_id
    ghost = process_worker_id("default").rpartition(":")[0] + f":{_dead_pid()}"
    [pre_claimed] = sync_ledger.claim(ghost)
    assert pre_claimed.status is JobStatus.LEASED
    other_pool = sync_ledger.enqueue(INGEST, subject=subject("other")).job_id
    sync_ledger.claim("another-pool@elsewhere:1")

    pool = make_pool(concurrency=0)
    await pool.start()
    state = sync_ledger.get(job_id)  # type: ignore[arg-type]
    assert state is not None and state.status is JobStatus.PENDING
    assert state.worker_id is None and state.attempt == 0
    assert status_of(sync_ledger, other_pool) is JobStatus.LEASED  # not ours to reap
    await pool.stop()


async def test_seed_reaper_resets_stale_claims(
    sync_ledger: Ledger, make_pool: MakePool, clock: FakeClock
) -> None:
    """The periodic reaper returns an expired claim to pending (time moved by the clock)."""
    job_id = sync_ledger.enqueue(INGEST, subject=subject()).job_id
    sync_ledger.claim("worker-old", lease_s=1)
    clock.advance(3600)
    pool = make_pool(concurrency=0, reaper_interval_s=0.05)
    await pool.start()

    async def reaped() -> bool:
        return status_of(sync_ledger, job_id) is JobStatus.PENDING

    assert await eventually(reaped, timeout=3.0)
    await pool.stop()
