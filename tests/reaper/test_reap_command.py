"""The reaper pass as a Ledger command (Ledger.reap) and the Reaper as a maintenance service,
on both backends."""

from __future__ import annotations

import asyncio
from datetime import timedelta

from reaper_helpers import plant_conflicting_dead_letter

from ledger import FakeClock, JobStatus, Ledger
from ledger.core.events import JobFailed
from ledger.maintenance.reaper import Reaper, ReaperConfig
from ledger.maintenance.runner import ServiceRunner


def test_reap_at_an_explicit_now_selects_and_stamps_with_it(
    defined: Ledger, clock: FakeClock
) -> None:
    """now= is the pass's time: a lease expired only by then is reaped, stamped then."""
    job_id = defined.enqueue("t").job_id
    assert job_id is not None
    defined.claim("w", lease_s=10)
    later = clock.now() + timedelta(seconds=11)

    assert defined.reap().processed == 0, "by the clock the lease is still live"
    report = defined.reap(ReaperConfig(retry_delay_s=5), now=later)

    assert [r.job_id for r in report.reaped] == [job_id]
    assert report.reaped[0].next_run_at == later + timedelta(seconds=5)
    failed = [r.event for r in defined.history(job_id) if isinstance(r.event, JobFailed)]
    assert [event.at for event in failed] == [later]


def test_a_deferral_pushes_the_lease_out_for_every_later_pass(
    ledger: Ledger, clock: FakeClock
) -> None:
    """A failed reap appends job_reap_deferred with the lease pushed to now + retry delay;
    later passes (any reaper: the deferral is in the job's lease) skip the job until that
    lease expires, then try it again and defer it again while the conflict lasts."""
    ledger.define("t", max_attempts=1)
    broken = ledger.enqueue("t", {"n": 1}).job_id
    assert broken is not None
    ledger.claim("w", lease_s=1)
    clock.advance(5)
    plant_conflicting_dead_letter(ledger, broken)
    config = ReaperConfig(retry_delay_s=60)

    first = ledger.reap(config)

    [error] = first.deferred_errors
    assert error.job_id == broken and error.deferred_until == clock.now() + timedelta(seconds=60)
    state = ledger.get(broken)
    assert state is not None and state.lease_expires_at == error.deferred_until
    assert state.last_heartbeat_at == state.enqueued_at, "a deferral is not a heartbeat"
    assert ledger.reap(config).deferred_error_count == 0, "skipped: the lease runs"
    clock.advance(60.001)
    again = ledger.reap(config)
    assert [e.job_id for e in again.deferred_errors] == [broken], "tried again, deferred again"
    names = [type(r.event).name for r in ledger.history(broken)]
    assert names == ["job_enqueued", "job_leased", "job_reap_deferred", "job_reap_deferred"]
    assert ledger.projections().verify(["queue"]).clean  # the planted dead letter is drift
    assert ledger.replay_check(broken).findings == []


def test_reap_expired_returns_the_reaped_jobs_new_states(defined: Ledger, clock: FakeClock) -> None:
    """The older command is the same pass: the reaped jobs, now pending again."""
    job_id = defined.enqueue("t").job_id
    defined.claim("w", lease_s=1)
    clock.advance(2)
    [state] = defined.reap_expired(retry_delay_s=0)
    assert state.job_id == job_id and state.status is JobStatus.PENDING


def test_the_reaper_service_passes_its_now_to_the_command(
    defined: Ledger, clock: FakeClock
) -> None:
    """Reaper.run_once(now) reaps what has expired by ``now``, not by the clock."""
    defined.enqueue("t")
    defined.claim("w", lease_s=10)
    reaper = Reaper(defined, ReaperConfig(limit=5))
    assert reaper.run_once().processed == 0
    assert reaper.run_once(clock.now() + timedelta(seconds=11)).processed == 1


async def test_the_service_runner_runs_the_reaper(defined: Ledger, clock: FakeClock) -> None:
    """Run by the ServiceRunner under its name and interval, the reaper reaps."""
    job_id = defined.enqueue("t").job_id
    assert job_id is not None
    defined.claim("w", lease_s=1)
    clock.advance(2)
    reaper = Reaper(defined, ReaperConfig(interval_s=12.5))
    asked: list[float] = []

    async def stop_after_first_pass(stop: asyncio.Event, seconds: float) -> bool:
        asked.append(seconds)
        stop.set()
        return True

    runner = ServiceRunner([reaper], pause=stop_after_first_pass)
    await asyncio.wait_for(runner.run(asyncio.Event()), 30)

    assert asked == [12.5]
    assert runner.stats["reaper"].runs == 1
    state = defined.get(job_id)
    assert state is not None and state.status is JobStatus.PENDING and state.attempt == 1


async def test_the_reapers_own_loop_reaps_at_once_and_ends_when_stopped(
    defined: Ledger, clock: FakeClock
) -> None:
    """Reaper.run: the first pass runs at start (its commit wakes listeners); stop ends the
    hour-long pause that follows at once."""
    defined.enqueue("t")
    defined.claim("w", lease_s=1)
    clock.advance(2)
    loop = asyncio.get_running_loop()
    reaped = asyncio.Event()
    defined.on_jobs_available(lambda: loop.call_soon_threadsafe(reaped.set))
    stop = asyncio.Event()
    running = asyncio.create_task(Reaper(defined, ReaperConfig(interval_s=3600)).run(stop))
    await asyncio.wait_for(reaped.wait(), 30)
    stop.set()
    await asyncio.wait_for(running, 30)
    assert defined.counts() == {"pending": 1}
