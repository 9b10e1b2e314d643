"""The maintenance service runner: several services, each on its own interval, one runner.

River's maintenance services, in asyncio. A :class:`Service` is a name, an interval and one
blocking pass (``run_once``); the runner runs each service's pass at once, then again every
``interval_s`` after the previous pass ended, until the stop event is set. The waits are on the
stop event (``stop`` ends every wait at once; nothing polls). Passes run on the runner's own
threads, one per service — never the loop's, never the default executor shared with handlers —
so a slow pass blocks neither the loop nor the other services. A pass that raises is logged and
counted and its service goes on at its next interval: one bad pass never stops maintenance.

Stopping does not interrupt a pass in progress: :meth:`ServiceRunner.run` returns once every
running pass has ended. A service that can end a long pass early (the chain witness, between
its batches) has a ``stop()``, called when the stop event is set. Cancelled instead (a
second signal), :meth:`run` returns at once, and the caller waits for the passes still on
their threads (:meth:`ServiceRunner.wait_for_passes`, bounded) before closing the store they
use: a connection closed under a running statement crashed the process (SQLite, seen).
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import wait as wait_for_futures
from typing import Protocol

import msgspec

log = logging.getLogger(__name__)


class Service(Protocol):
    """A maintenance service: ``run_once`` is one blocking pass; its result is not used."""

    @property
    def name(self) -> str: ...

    @property
    def interval_s(self) -> float: ...

    def run_once(self) -> object: ...


Pause = Callable[[asyncio.Event, float], Awaitable[bool]]
"""Wait ``seconds`` unless ``stop`` is set first; return whether it is set."""


async def pause_unless_stopped(stop: asyncio.Event, seconds: float) -> bool:
    """The real pause: ``seconds`` of wall time, cut short by ``stop``."""
    try:
        await asyncio.wait_for(stop.wait(), timeout=seconds)
    except TimeoutError:
        return False
    return True


class ServiceStats(msgspec.Struct):
    """How a service's passes went since the runner started."""

    runs: int = 0
    """Passes that ended without an error."""
    failures: int = 0
    """Passes that raised."""
    last_error: str | None = None


class ServiceRunner:
    """Runs :class:`Service` passes on their intervals (see the module docstring).

    ``pause`` is how the runner waits between passes; tests pass one driven by a fake clock.
    """

    def __init__(self, services: Sequence[Service], *, pause: Pause = pause_unless_stopped) -> None:
        names = [service.name for service in services]
        if len(set(names)) != len(names):
            raise ValueError(f"service names must be unique: {names}")
        self._services = list(services)
        self._pause = pause
        self.stats: dict[str, ServiceStats] = {name: ServiceStats() for name in names}
        self._running: set[Future[object]] = set()
        self._running_lock = threading.Lock()  # a pass's thread removes its own future

    async def run(self, stop: asyncio.Event) -> None:
        """Run every service until ``stop`` is set and their passes in progress have ended."""
        if not self._services:
            await stop.wait()
            return
        executor = ThreadPoolExecutor(
            max_workers=len(self._services), thread_name_prefix="jobledger-maintenance"
        )
        stopping = asyncio.ensure_future(self._stop_services_on(stop))
        try:
            await asyncio.gather(*(self._loop(s, stop, executor) for s in self._services))
        finally:
            stopping.cancel()
            self._stop_services()
            # Cancelled mid-pass: the pass's thread finishes on its own; do not wait for it
            # here (the caller may, bounded: wait_for_passes).
            executor.shutdown(wait=False, cancel_futures=True)

    def wait_for_passes(self, timeout_s: float) -> bool:
        """Block until the passes still running on their threads have ended, up to
        ``timeout_s``; whether they all did. (After a cancelled :meth:`run`, before closing
        what they use.)"""
        with self._running_lock:
            running = list(self._running)
        if not running:
            return True
        _, pending = wait_for_futures(running, timeout=timeout_s)
        return not pending

    def _forget(self, future: Future[object]) -> None:
        with self._running_lock:
            self._running.discard(future)

    async def _stop_services_on(self, stop: asyncio.Event) -> None:
        await stop.wait()
        self._stop_services()

    def _stop_services(self) -> None:
        for service in self._services:
            stop_early = getattr(service, "stop", None)
            if stop_early is not None:
                stop_early()

    async def _loop(
        self, service: Service, stop: asyncio.Event, executor: ThreadPoolExecutor
    ) -> None:
        loop = asyncio.get_running_loop()
        stats = self.stats[service.name]
        while not stop.is_set():
            try:
                future = executor.submit(service.run_once)
                with self._running_lock:
                    self._running.add(future)
                future.add_done_callback(self._forget)
                await asyncio.wrap_future(future, loop=loop)
            except Exception as error:
                stats.failures += 1
                stats.last_error = _describe(error)
                log.warning(
                    "maintenance service %s failed: %s",
                    service.name,
                    stats.last_error,
                    exc_info=True,
                )
            else:
                stats.runs += 1
            if await self._pause(stop, service.interval_s):
                return


def _describe(error: Exception) -> str:
    """``Type: message``, even for an exception whose ``__str__`` itself raises."""
    try:
        message = str(error)
    except Exception:
        message = "<unprintable>"
    return f"{type(error).__name__}: {message}"
