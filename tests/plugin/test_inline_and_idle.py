"""Inline mode and ``run_until_idle(advance_clock=True)`` through the plugin's fixtures in this
suite (its PostgreSQL ledgers from the suite's pool), on both backends."""

from __future__ import annotations

import pytest

from ledger import BackoffPolicy, JobContext, Ledger, PermanentError, TransientError
from ledger.clock import FakeClock, SystemClock
from ledger.runtime.handlers import Registry
from ledger.testing import InlineLedger, enqueued, run_until_idle, sync_definitions

pytestmark = pytest.mark.parametrize(
    "jobledger_backend", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)


def _names(ledger: Ledger, job_id: object) -> list[str]:
    return [record.event.name for record in ledger.history(job_id)]  # type: ignore[arg-type]


def _clean(ledger: Ledger) -> None:
    assert ledger.projections().verify().clean
    assert [f for replay in ledger.replay_check_all() for f in replay.findings] == []


def test_a_transient_failure_at_inline_enqueue_is_a_retry_a_later_enqueue_runs(
    jobledger_inline: InlineLedger, jobledger_registry: Registry, jobledger_clock: FakeClock
) -> None:
    """The failure is recorded as a worker's (failed, retry scheduled); the retry runs when
    the clock has passed its backoff and the queue is worked again."""
    attempts: list[int] = []

    @jobledger_registry.handler("flaky", backoff=BackoffPolicy(base_s=30, jitter=0.0))
    def flaky(ctx: JobContext) -> str:
        attempts.append(ctx.job.attempt)
        if len(attempts) == 1:
            raise TransientError("down")
        return "up"

    job_id = jobledger_inline.enqueue("flaky").job_id
    assert jobledger_inline.get(job_id).status == "pending"  # type: ignore[union-attr]
    assert _names(jobledger_inline, job_id) == [
        "job_enqueued",
        "job_leased",
        "job_failed",
        "job_retry_scheduled",
    ]
    assert jobledger_inline.work_now().claimed == 0  # not yet due
    jobledger_clock.advance(30)
    assert jobledger_inline.work_now().succeeded == 1
    assert jobledger_inline.get(job_id).output == "up"  # type: ignore[union-attr]
    assert attempts == [1, 2]
    _clean(jobledger_inline)


def test_a_permanent_failure_at_inline_enqueue_leaves_the_job_dead(
    jobledger_inline: InlineLedger, jobledger_registry: Registry
) -> None:
    """A handler's permanent error is recorded (dead), not raised into the test."""

    @jobledger_registry.handler("broken")
    def broken(ctx: JobContext) -> None:
        raise PermanentError("no")

    with enqueued(jobledger_inline) as jobs:
        job_id = jobledger_inline.enqueue("broken", {"n": 1}).job_id
    jobs.assert_jobs([("broken", {"n": 1})])
    assert jobledger_inline.get(job_id).status == "dead"  # type: ignore[union-attr]
    _clean(jobledger_inline)


async def test_run_until_idle_advances_over_every_retry_until_the_job_dies(
    jobledger_ledger: Ledger, jobledger_registry: Registry, jobledger_clock: FakeClock
) -> None:
    """Always failing with three attempts: two clock moves, three claims, dead at the end,
    at the time the backoffs add up to."""

    @jobledger_registry.handler(
        "down", max_attempts=3, backoff=BackoffPolicy(base_s=10, max_s=100, jitter=0.0)
    )
    async def down(ctx: JobContext) -> None:
        raise TransientError("down")

    # Defined from the handler before the first enqueue: auto_define would use the defaults.
    sync_definitions(jobledger_ledger, jobledger_registry)
    start = jobledger_clock.now()
    job_id = jobledger_ledger.enqueue("down").job_id
    stats = await run_until_idle(jobledger_ledger, jobledger_registry, advance_clock=True)
    assert (stats.claimed, stats.retried, stats.dead) == (3, 2, 1)
    assert jobledger_ledger.get(job_id).status == "dead"  # type: ignore[union-attr]
    assert (jobledger_clock.now() - start).total_seconds() == 10 + 20
    _clean(jobledger_ledger)


async def test_advance_clock_needs_a_fake_clock(jobledger_url: str) -> None:
    """On a system clock there is nothing to move: a clear error, nothing worked."""
    with (
        Ledger.open(jobledger_url, clock=SystemClock()) as ledger,
        pytest.raises(TypeError, match="FakeClock"),
    ):
        await run_until_idle(ledger, Registry(), advance_clock=True)
