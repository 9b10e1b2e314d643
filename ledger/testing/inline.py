"""Inline (eager) mode: a ledger whose enqueue runs the handlers before it returns.

:class:`InlineLedger` is a :class:`~ledger.api.ledger.Ledger` on the same store whose every
enqueue (``enqueue``, ``enqueue_many``, ``enqueue_outcomes``: they all end in
``enqueue_outcomes``) commits as usual and then works the queue with :func:`drain` until
nothing is due, on the calling thread, before it returns. Nothing is faked: each job is
claimed by the runtime's own claim (a ``job_leased`` naming the worker id
``inline@<host>:<pid>``), run by the executor, and its outcome recorded by the completer, the
events a worker appends, in the same transactions. ``jobledger projections verify`` and
``jobledger replay --check --all`` therefore hold after it as after a worker.

What it does not do: run a job before its ``run_at`` (a delayed enqueue or a retry's backoff
stays pending until the clock passes it and something works the queue again: the next
enqueue, :meth:`InlineLedger.work_now`, or ``run_until_idle``); run types the registry has no
handler for (they stay pending). A job a handler enqueues is run by the same drain, after the
handler's own outcome is recorded, not in the middle of it.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Unpack

from ledger.api.ledger import Ledger
from ledger.core.enqueue_plan import EnqueuePlan
from ledger.core.values import EnqueueRequest
from ledger.runtime.config import PoolSettings
from ledger.runtime.definitions import sync_definitions
from ledger.runtime.handlers import Registry
from ledger.runtime.health import PoolStats
from ledger.testing.workers import drain

__all__ = ["INLINE_WORKER", "InlineLedger"]

INLINE_WORKER = "inline"
"""The name in the worker id of the leases inline mode takes (``inline@<host>:<pid>``)."""


class InlineLedger(Ledger):
    """A ledger on ``ledger``'s store (and clock) that runs ``registry``'s handlers at enqueue.

    Before each enqueue the registry's types are defined (or kept, if already defined), as a
    pool does at start, so handlers registered after it was made count too, with their
    options. Meant for one test's thread: an enqueue made while another thread's drain is
    running returns at once, its job left to that drain. Closing it closes nothing: the store
    stays ``ledger``'s.
    """

    def __init__(
        self,
        ledger: Ledger,
        registry: Registry,
        **settings: Unpack[PoolSettings],
    ) -> None:
        super().__init__(ledger.store, clock=ledger.clock, auto_define=ledger.auto_define)
        self.registry = registry
        self.worked = PoolStats()
        """What inline mode has worked so far (summed over every drain)."""
        self._settings: dict[str, Any] = {"name": INLINE_WORKER, **settings}
        self._lock = threading.Lock()
        self._working = False

    def close(self) -> None:
        """Nothing to close: the store is the wrapped ledger's."""

    def enqueue_outcomes(
        self, requests: Sequence[EnqueueRequest], *, actor: str | None = None
    ) -> EnqueuePlan:
        sync_definitions(self, self.registry)
        plan = super().enqueue_outcomes(requests, actor=actor)
        self.work_now()
        return plan

    def work_now(self) -> PoolStats:
        """Work the queue until nothing is due, now, blocking the caller (from a running
        event loop too: the drain then runs on a thread of its own, so a test's loop waits for
        it, as an eager mode must). Called from inside a handler (a job enqueuing another),
        it does nothing: the drain already running claims the new job next."""
        with self._lock:
            if self._working:
                return PoolStats()
            self._working = True
        try:
            stats = _run_blocking(self._drain)
        finally:
            with self._lock:
                self._working = False
        for name, value in vars(stats).items():
            setattr(self.worked, name, getattr(self.worked, name) + value)
        return stats

    def _drain(self) -> PoolStats:
        return asyncio.run(drain(self, self.registry, **self._settings))


def _run_blocking(work: Callable[[], PoolStats]) -> PoolStats:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return work()
    with ThreadPoolExecutor(1, thread_name_prefix="jobledger-inline") as thread:
        return thread.submit(work).result()
