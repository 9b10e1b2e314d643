"""ledger.testing: the helpers a user's tests work the queue with, on both backends."""

from __future__ import annotations

import asyncio

from ledger import EnqueueRequest, JobStatus, Ledger
from ledger.clock import FakeClock as ClockFakeClock
from ledger.runtime.handlers import JobContext, PermanentError, Registry, TransientError
from ledger.testing import FakeClock, drain, run_until_idle, sync_definitions, work_job


def email_registry() -> Registry:
    """``email`` sends (or, for ``bad``, refuses permanently); ``flaky`` fails once."""
    registry = Registry()

    @registry.handler("email", max_attempts=4)
    async def email(ctx: JobContext) -> dict[str, str]:
        if ctx.payload["to"] == "bad":
            raise PermanentError("no such mailbox")
        return {"sent_to": str(ctx.payload["to"])}

    @registry.handler("flaky")
    def flaky(ctx: JobContext) -> str:
        if ctx.attempt == 1:
            raise TransientError("try later")
        return "ok"

    return registry


def test_fake_clock_is_the_ledgers_own() -> None:
    """ledger.testing re-exports the one fake clock; it is not a second implementation."""
    assert FakeClock is ClockFakeClock


async def test_drain_works_every_due_job_and_records_each_before_returning(
    sync_ledger: Ledger,
) -> None:
    """drain returns once nothing is due; every outcome is already in the ledger and counted."""
    registry = email_registry()
    sync_ledger.define("email")
    sync_ledger.enqueue_many(
        [EnqueueRequest(job_type="email", payload={"to": to}) for to in ("a", "b", "bad")]
    )
    stats = await drain(sync_ledger, registry)
    assert (stats.claimed, stats.succeeded, stats.dead, stats.retried) == (3, 2, 1, 0)
    assert sync_ledger.counts() == {"succeeded": 2, "dead": 1}


async def test_drain_leaves_a_retry_until_the_clock_moves_past_its_backoff(
    sync_ledger: Ledger, clock: FakeClock
) -> None:
    """A transient failure is recorded as a retry; the retry runs only after clock.advance."""
    registry = email_registry()
    sync_ledger.define("flaky")
    job_id = sync_ledger.enqueue("flaky").job_id
    assert job_id is not None
    assert (await drain(sync_ledger, registry)).retried == 1
    assert (await drain(sync_ledger, registry)).claimed == 0
    clock.advance(3600)
    stats = await drain(sync_ledger, registry)
    assert (stats.claimed, stats.succeeded) == (1, 1)
    state = sync_ledger.get(job_id)
    assert state is not None and state.status is JobStatus.SUCCEEDED and state.output == "ok"


async def test_drain_claims_only_the_types_it_is_given_and_leaves_no_task(
    sync_ledger: Ledger,
) -> None:
    """Pool settings apply (types=); drain runs on the calling task and starts none."""
    registry = email_registry()
    sync_ledger.define("email")
    sync_ledger.define("flaky")
    flaky = sync_ledger.enqueue("flaky").job_id
    sync_ledger.enqueue("email", {"to": "a"})
    tasks_before = asyncio.all_tasks()
    stats = await drain(sync_ledger, registry, types=["email"])
    assert asyncio.all_tasks() <= tasks_before
    assert (stats.claimed, stats.succeeded) == (1, 1)
    state = sync_ledger.get(flaky)  # type: ignore[arg-type]
    assert state is not None and state.status is JobStatus.PENDING and state.attempt == 0


async def test_drain_does_not_sync_definitions_but_sync_definitions_does(
    sync_ledger: Ledger,
) -> None:
    """A handler's options reach a defined type through sync_definitions(apply=True), not
    through drain."""
    registry = email_registry()
    sync_ledger.define("email")
    await drain(sync_ledger, registry)
    definition = sync_ledger.definition("email")
    assert definition is not None and definition.max_attempts == 8  # the ledger's default
    await asyncio.to_thread(sync_definitions, sync_ledger, registry, apply=True)
    definition = sync_ledger.definition("email")
    assert definition is not None and definition.max_attempts == 4


async def test_work_job_runs_a_claimed_job_and_records_its_outcome_at_once(
    sync_ledger: Ledger,
) -> None:
    """work_job records the outcome under the job's own lease and returns the new state."""
    registry = email_registry()
    sync_ledger.define("email")
    sync_ledger.enqueue("email", {"to": "a"})
    [claimed] = sync_ledger.claim("someone-else")
    state = await work_job(sync_ledger, registry, claimed)
    assert state is not None and state.status is JobStatus.SUCCEEDED
    assert state.output == {"sent_to": "a"} and state == sync_ledger.get(claimed.job_id)


async def test_run_until_idle_runs_a_real_pool_to_idle_and_stops_it(sync_ledger: Ledger) -> None:
    """A started pool (definitions applied, several slots) works everything due, then stops:
    its stats come back and none of its tasks is left running."""
    registry = email_registry()
    sync_ledger.define("email")
    sync_ledger.enqueue_many(
        [EnqueueRequest(job_type="email", payload={"to": f"u{i}"}) for i in range(12)]
    )
    tasks_before = asyncio.all_tasks()
    stats = await run_until_idle(
        sync_ledger,
        registry,
        concurrency=3,
        poll_interval_s=0.05,
        types=["email"],
        apply_definitions=True,
    )
    assert asyncio.all_tasks() <= tasks_before
    assert (stats.claimed, stats.succeeded) == (12, 12)
    assert sync_ledger.counts() == {"succeeded": 12}
    definition = sync_ledger.definition("email")
    assert definition is not None and definition.max_attempts == 4
