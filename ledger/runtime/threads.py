"""The worker pool's threads: one lane for sync handlers, another for the pool's own I/O.

Handlers and the pool's database calls never share a thread pool, and neither uses asyncio's
default executor (which the application's own code may fill). The lane split is what keeps a
pool alive under sync handlers: a handler thread that waits for its own progress write must
never be able to occupy the thread that write needs (wave 1 deadlocked exactly so: ten sync
handlers calling ``progress`` filled the six shared threads while their writes queued behind
them). The I/O lane's calls never wait for a handler, so they always drain.

A lane's executor is created on first use and dropped by :meth:`ThreadLane.shutdown`, so a
pool that is stopped and started again gets fresh threads. A sync handler that never returns
cannot be stopped from outside (Python has no thread cancellation): it keeps its thread until
it returns, and :attr:`ThreadLane.busy` shows it.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import ParamSpec, TypeVar

P = ParamSpec("P")
T = TypeVar("T")

DEFAULT_IO_THREADS = 4
"""Threads for a pool's own database calls. Its claims, completions and heartbeats are one
call each at a time; the rest serve handlers' progress writes and releases, which wait for a
pooled connection anyway."""


class ThreadLane:
    """A named thread pool of fixed size that coroutines hand blocking calls to."""

    def __init__(self, size: int, name: str) -> None:
        if size < 1:
            raise ValueError("a thread lane needs at least one thread")
        self.size = size
        self.name = name
        self._executor: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()
        self._busy = 0

    @property
    def busy(self) -> int:
        """Calls running on a thread of this lane right now."""
        return self._busy

    async def run(self, function: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """``function(*args, **kwargs)`` on a thread of this lane (with the caller's context
        variables, as ``asyncio.to_thread`` does)."""
        context = contextvars.copy_context()
        call = functools.partial(self._counted, context, function, *args, **kwargs)
        return await asyncio.get_running_loop().run_in_executor(self._ensure(), call)

    def shutdown(self) -> None:
        """Let the threads go once idle; calls still queued are cancelled. Does not wait (a
        hung sync handler would make that wait forever)."""
        with self._lock:
            executor, self._executor = self._executor, None
        if executor is not None:
            executor.shutdown(wait=False, cancel_futures=True)

    def _ensure(self) -> ThreadPoolExecutor:
        with self._lock:
            if self._executor is None:
                self._executor = ThreadPoolExecutor(self.size, thread_name_prefix=self.name)
            return self._executor

    def _counted(
        self,
        context: contextvars.Context,
        function: Callable[P, T],
        *args: P.args,
        **kwargs: P.kwargs,
    ) -> T:
        with self._lock:
            self._busy += 1
        try:
            return context.run(function, *args, **kwargs)
        finally:
            with self._lock:
                self._busy -= 1
