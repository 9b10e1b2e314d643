"""What enqueue answers (``Enqueued``): each outcome with its job id, and the handle's status,
wait, output and history, on both backends."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from datetime import datetime

import pytest

from ledger import (
    EnqueueRequest,
    FakeClock,
    JobNotSucceededError,
    JobStatus,
    JobWaitTimeoutError,
    Ledger,
    PermanentError,
    Registry,
    Subject,
    SyncJobContext,
    WorkerPool,
)
from ledger.testing import drain

WAITER = "enqueued-waiter"


class WaiterClock(FakeClock):
    """A fake clock that says when the waiter thread first read it (the wait's deadline), so
    a test moves on only once the wait is under way."""

    def __init__(self) -> None:
        super().__init__()
        self.waiter_asked = threading.Event()

    def now(self) -> datetime:
        now = super().now()
        if threading.current_thread().name == WAITER:
            self.waiter_asked.set()
        return now


@pytest.fixture
def waiter_clock() -> WaiterClock:
    return WaiterClock()


@pytest.fixture
def watched(db_url: str, waiter_clock: WaiterClock) -> Iterator[Ledger]:
    """A ledger on each backend whose clock tells when a wait started."""
    with Ledger.open(db_url, clock=waiter_clock) as opened:
        yield opened


def test_each_outcome_names_a_job(defined: Ledger) -> None:
    """created: a new job; existing: the key's holder; skipped: the subject's live job."""
    created = defined.enqueue("t", {"a": 1}, idempotency_key="k")
    existing = defined.enqueue("t", {"a": 1}, idempotency_key="k")
    subject = Subject(source_id="src", uri="doc/1")
    live = defined.enqueue("t", subject=subject)
    skipped = defined.enqueue("t", subject=subject)
    assert [e.outcome for e in (created, existing, live, skipped)] == [
        "created",
        "existing",
        "created",
        "skipped",
    ]
    assert existing.job_id == created.job_id and skipped.job_id == live.job_id
    assert (created.created, existing.created, skipped.created) == (True, False, False)
    assert existing == defined.enqueue("t", {"a": 1}, idempotency_key="k")
    assert existing != created


def test_a_batch_answers_each_request_in_order(defined: Ledger) -> None:
    """enqueue_many gives one answer per request; a repeat and a skipped one inside the batch
    name the batch's own first job."""
    subject = Subject(source_id="src", uri="doc/2")
    answers = defined.enqueue_many(
        [
            EnqueueRequest("t", idempotency_key="k"),
            EnqueueRequest("t", idempotency_key="k"),
            EnqueueRequest("t", subject=subject),
            EnqueueRequest("t", subject=subject),
        ]
    )
    assert [a.outcome for a in answers] == ["created", "existing", "created", "skipped"]
    assert answers[1].job_id == answers[0].job_id and answers[3].job_id == answers[2].job_id


def test_status_and_history_read_the_job_as_it_is_now(defined: Ledger) -> None:
    """status() follows the job; history() is the Reader's history of it."""
    job = defined.enqueue("t")
    assert job.status() is JobStatus.PENDING
    [leased] = defined.claim("w")
    assert job.status() is JobStatus.LEASED
    assert leased.lease is not None
    defined.succeed(leased.lease, output={"ok": True})
    assert job.status() is JobStatus.SUCCEEDED
    assert job.history() == defined.history(job.job_id)
    assert [r.event.name for r in job.history()] == ["job_enqueued", "job_leased", "job_succeeded"]
    assert job.output() == {"ok": True}


async def test_output_of_a_dead_job_names_why_it_has_none(defined: Ledger) -> None:
    """A job that died has no output: JobNotSucceededError names its status and last error."""
    registry = Registry()

    @registry.handler("t")
    def refuse(ctx: SyncJobContext) -> None:
        raise PermanentError("no such card", code="card.unknown")

    job = defined.enqueue("t")
    with pytest.raises(JobNotSucceededError, match="it is pending"):
        job.output()
    await drain(defined, registry)
    with pytest.raises(JobNotSucceededError) as raised:
        job.output()
    assert raised.value.code == "job.not_succeeded"
    assert "it is dead: card.unknown: no such card" in str(raised.value)


async def test_wait_returns_when_a_running_pool_finishes_the_job(
    watched: Ledger, waiter_clock: WaiterClock
) -> None:
    """A wait under way (the handler holds the job until then) returns the succeeded state
    once a real WorkerPool has finished the job — woken by LISTEN on PostgreSQL, by polling on
    SQLite."""
    registry = Registry()

    @registry.job("double")
    def double(ctx: SyncJobContext, *, n: int) -> int:
        assert waiter_clock.waiter_asked.wait(30), "the wait never started"
        return n * 2

    job = double.enqueue(watched, n=21)
    ended: list[object] = []
    waiter = threading.Thread(target=lambda: ended.append(job.wait(60)), name=WAITER)
    pool = WorkerPool(watched, registry, concurrency=1)
    await pool.start()
    try:
        waiter.start()
        await asyncio.to_thread(waiter.join, 60)
    finally:
        await pool.stop()
    [state] = ended
    assert state == job.job() and job.status() is JobStatus.SUCCEEDED
    assert job.output() == 42


def test_wait_times_out_on_the_ledgers_clock(watched: Ledger, waiter_clock: WaiterClock) -> None:
    """No worker: once the fake clock passes the timeout, wait raises JobWaitTimeoutError (a
    TimeoutError) naming the job and its status; the job is left as it was."""
    watched.define("t")
    job = watched.enqueue("t")
    raised: list[BaseException] = []

    def wait() -> None:
        try:
            job.wait(60)
        except BaseException as error:  # handed to the test thread
            raised.append(error)

    waiter = threading.Thread(target=wait, name=WAITER)
    waiter.start()
    assert waiter_clock.waiter_asked.wait(30)
    waiter_clock.advance(61)
    waiter.join(30)
    [error] = raised
    assert isinstance(error, JobWaitTimeoutError) and isinstance(error, TimeoutError)
    assert error.code == "job.wait_timeout"
    assert f"job {job.job_id} (t) still pending after waiting 60s" in str(error)
    assert job.status() is JobStatus.PENDING


def test_wait_on_a_finished_job_returns_at_once(defined: Ledger) -> None:
    """A job already terminal needs no waiting (and no listener): its state, even with a
    zero timeout."""
    job = defined.enqueue("t")
    defined.cancel(job.job_id)
    assert job.wait(0).status is JobStatus.CANCELLED
