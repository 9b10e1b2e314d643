"""The maintenance service runner (ledger/maintenance/runner.py): intervals, failures, threads
and stopping, driven by a fake clock and events (no sleeps decide any ordering)."""

from __future__ import annotations

import asyncio
import logging
import threading
from datetime import datetime, timedelta

import pytest

from ledger.clock import FakeClock
from ledger.maintenance.runner import ServiceRunner, pause_unless_stopped

GUARD_S = 5.0
"""Upper bound on waiting for a signal (a hang fails the test instead of freezing it)."""


class ClockPauses:
    """A runner pause over a FakeClock: each pause ends when the clock passes its deadline
    (moved by :meth:`advance`) or when the stop event is set."""

    def __init__(self, clock: FakeClock) -> None:
        self.clock = clock
        self._waiting: list[tuple[datetime, asyncio.Event]] = []
        self._changed = asyncio.Event()

    async def __call__(self, stop: asyncio.Event, seconds: float) -> bool:
        entry = (self.clock.now() + timedelta(seconds=seconds), asyncio.Event())
        self._waiting.append(entry)
        self._changed.set()
        waits = [asyncio.ensure_future(stop.wait()), asyncio.ensure_future(entry[1].wait())]
        try:
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for wait in waits:
                wait.cancel()
            self._waiting.remove(entry)
        return stop.is_set()

    async def until_waiting(self, count: int) -> None:
        """Return once ``count`` pauses are in progress."""
        while len(self._waiting) != count:
            self._changed.clear()
            await asyncio.wait_for(self._changed.wait(), GUARD_S)

    def advance(self, seconds: float) -> None:
        now = self.clock.advance(seconds)
        for due, woken in self._waiting:
            if due <= now:
                woken.set()


class RecordingService:
    """Records the clock's time at each pass and signals the loop; may fail on chosen passes."""

    def __init__(
        self, name: str, interval_s: float, clock: FakeClock, *, failing: set[int] = frozenset()
    ) -> None:
        self.name = name
        self.interval_s = interval_s
        self.clock = clock
        self.failing = failing
        self.calls: list[datetime] = []
        self.threads: set[str] = set()
        self._loop = asyncio.get_running_loop()
        self.passes: asyncio.Queue[int] = asyncio.Queue()

    def run_once(self) -> None:
        self.calls.append(self.clock.now())
        self.threads.add(threading.current_thread().name)
        number = len(self.calls)
        self._loop.call_soon_threadsafe(self.passes.put_nowait, number)
        if number in self.failing:
            raise RuntimeError(f"pass {number} broke")

    async def next_pass(self) -> int:
        return await asyncio.wait_for(self.passes.get(), GUARD_S)


async def test_each_service_runs_at_once_then_on_its_own_interval() -> None:
    """A 5 s and a 7 s service: both run at start; at +5 only the first, at +7 the second."""
    clock = FakeClock()
    start = clock.now()
    fast = RecordingService("fast", 5, clock)
    slow = RecordingService("slow", 7, clock)
    pauses = ClockPauses(clock)
    stop = asyncio.Event()
    runner = ServiceRunner([fast, slow], pause=pauses)
    running = asyncio.create_task(runner.run(stop))

    assert await fast.next_pass() == 1 and await slow.next_pass() == 1
    await pauses.until_waiting(2)
    pauses.advance(5)
    assert await fast.next_pass() == 2
    await pauses.until_waiting(2)
    assert len(slow.calls) == 1, "the slow service's interval has not passed"
    pauses.advance(2)
    assert await slow.next_pass() == 2
    await pauses.until_waiting(2)

    stop.set()
    await asyncio.wait_for(running, GUARD_S)
    seconds = [start + timedelta(seconds=s) for s in (0, 5)]
    assert fast.calls == seconds
    assert slow.calls == [start, start + timedelta(seconds=7)]
    assert runner.stats["fast"].runs == 2 and runner.stats["slow"].runs == 2


async def test_a_failing_pass_is_logged_and_counted_and_the_service_goes_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Passes 1 and 2 raise: both are counted and logged; pass 3 still runs on time."""
    clock = FakeClock()
    flaky = RecordingService("flaky", 1, clock, failing={1, 2})
    pauses = ClockPauses(clock)
    stop = asyncio.Event()
    runner = ServiceRunner([flaky], pause=pauses)
    with caplog.at_level(logging.WARNING, logger="ledger.maintenance.runner"):
        running = asyncio.create_task(runner.run(stop))
        for expected in (1, 2, 3):
            assert await flaky.next_pass() == expected
            await pauses.until_waiting(1)
            pauses.advance(1)
        stop.set()
        await asyncio.wait_for(running, GUARD_S)
    stats = runner.stats["flaky"]
    assert (stats.failures, stats.runs) == (2, 1)
    assert stats.last_error == "RuntimeError: pass 2 broke"
    failures = [r for r in caplog.records if "maintenance service flaky failed" in r.message]
    assert len(failures) == 2 and failures[0].exc_info is not None


async def test_an_exception_that_cannot_be_printed_is_still_counted() -> None:
    """A pass raising an exception whose __str__ raises does not take the runner down."""

    class UnprintableError(Exception):
        def __str__(self) -> str:
            raise ValueError("no")

    class Broken:
        name = "broken"
        interval_s = 1.0

        def run_once(self) -> None:
            raise UnprintableError

    stop = asyncio.Event()

    async def stop_after_first(stopping: asyncio.Event, seconds: float) -> bool:
        stopping.set()
        return True

    runner = ServiceRunner([Broken()], pause=stop_after_first)
    await asyncio.wait_for(runner.run(stop), GUARD_S)
    assert runner.stats["broken"].failures == 1
    assert runner.stats["broken"].last_error == "UnprintableError: <unprintable>"


async def test_a_blocking_pass_runs_off_the_loop_and_off_the_default_executor() -> None:
    """While a pass blocks on a threading.Event, the loop still runs and releases it."""
    started = asyncio.Event()
    release = threading.Event()
    loop = asyncio.get_running_loop()
    outcome: list[bool] = []
    threads: list[str] = []

    class Blocking:
        name = "blocking"
        interval_s = 3600.0

        def run_once(self) -> None:
            threads.append(threading.current_thread().name)
            loop.call_soon_threadsafe(started.set)
            # On the loop's own thread this would time out: the loop could not release it.
            outcome.append(release.wait(timeout=GUARD_S))

    stop = asyncio.Event()
    running = asyncio.create_task(ServiceRunner([Blocking()]).run(stop))
    await asyncio.wait_for(started.wait(), GUARD_S)
    release.set()
    stop.set()
    await asyncio.wait_for(running, GUARD_S)
    assert outcome == [True]
    assert threads[0].startswith("jobledger-maintenance")


async def test_stop_ends_a_long_pause_at_once() -> None:
    """The real pause waits on the stop event: an hour's interval ends when stop is set."""
    ran = asyncio.Event()
    loop = asyncio.get_running_loop()

    class Hourly:
        name = "hourly"
        interval_s = 3600.0

        def run_once(self) -> None:
            loop.call_soon_threadsafe(ran.set)

    stop = asyncio.Event()
    running = asyncio.create_task(ServiceRunner([Hourly()]).run(stop))
    await asyncio.wait_for(ran.wait(), GUARD_S)
    stop.set()
    await asyncio.wait_for(running, GUARD_S)


async def test_the_real_pause_reports_whether_it_was_stopped() -> None:
    """pause_unless_stopped: False after its time, True at once if stop is already set."""
    stop = asyncio.Event()
    assert await pause_unless_stopped(stop, 0) is False
    stop.set()
    assert await asyncio.wait_for(pause_unless_stopped(stop, 3600), GUARD_S) is True


async def test_a_runner_stopped_before_it_starts_runs_nothing() -> None:
    """With stop already set no pass runs."""
    clock = FakeClock()
    service = RecordingService("s", 1, clock)
    stop = asyncio.Event()
    stop.set()
    await asyncio.wait_for(ServiceRunner([service]).run(stop), GUARD_S)
    assert service.calls == []


def test_service_names_must_be_unique() -> None:
    """Two services of one name would share their stats: refused."""

    class Named:
        name = "same"
        interval_s = 1.0

        def run_once(self) -> None:
            return None

    with pytest.raises(ValueError, match="unique"):
        ServiceRunner([Named(), Named()])


class BlockingService:
    """A pass that runs until released, or until ``stop()`` (as the chain witness's does)."""

    name = "blocking"
    interval_s = 60.0

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()
        self.stopped = threading.Event()

    def stop(self) -> None:
        self.stopped.set()

    def run_once(self) -> None:
        self.entered.set()
        self.release.wait(GUARD_S)


async def test_a_cancelled_run_leaves_its_pass_and_the_caller_can_wait_for_it() -> None:
    """A second signal cancels the runner: it returns at once, its pass still running on its
    thread; ``wait_for_passes`` then tells whether the pass has ended (the pool waits, bounded,
    before closing the store the pass uses), and the service was asked to stop early."""
    service = BlockingService()
    runner = ServiceRunner([service])
    task = asyncio.ensure_future(runner.run(asyncio.Event()))
    assert await asyncio.to_thread(service.entered.wait, GUARD_S)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert service.stopped.is_set()
    assert not await asyncio.to_thread(runner.wait_for_passes, 0.05)
    service.release.set()
    assert await asyncio.to_thread(runner.wait_for_passes, GUARD_S)
