"""Stopping the handler of a job that was cancelled while it ran.

The pool learns of the cancel from the fence: its heartbeat's answer for that lease is
:class:`~ledger.core.errors.JobCancelledError` (on PostgreSQL the cancelling commit's NOTIFY
makes the pool renew at once; elsewhere the next renewal answers, within one heartbeat
interval). It then calls :meth:`Cancellation.request` on the job's :class:`Cancellation`:

- every handler's ``ctx.cancelled`` turns true, and its next ``ctx.progress()`` or
  ``ctx.heartbeat()`` raises ``JobCancelledError`` without writing;
- an ``async def`` handler's task is cancelled (as ``asyncio.timeout`` does it: the slot's own
  task, uncancelled again once the handler is out, so the slot lives on). A sync handler
  cannot be stopped from outside (Python has no thread cancellation): it stops when it looks.

Whatever the handler comes to, its outcome is then recorded as ``job_handler_stopped``
(:func:`ledger.jobs.worker_writes.worker_outcome_decision`), so the history says when it
stopped.
"""

from __future__ import annotations

import asyncio
from types import TracebackType


class HandlerCancelledError(Exception):
    """Raised out of a :class:`Cancellation`'s block when the pool cancelled the async handler
    inside it because its job was cancelled (the runtime's signal, never a handler's)."""


class Cancellation:
    """One running job's cancel: a flag a handler can read, and (``cancel_task``: an async
    handler's) a handle on the task running the handler. Used as ``with cancellation:``
    around the handler's run; a :meth:`request` then cancels the task, and that cancellation
    comes out of the block as :class:`HandlerCancelledError`, while any other (the pool
    stopping, the handler's timeout) passes through unchanged. A class with ``__enter__``
    rather than a ``@contextmanager``: every job enters one. Called on the loop's thread."""

    __slots__ = ("_cancel_task", "_cancelling", "_sent", "_task", "requested")

    def __init__(self, *, cancel_task: bool = True) -> None:
        self.requested = False
        """The job was cancelled (``ctx.cancelled``)."""
        self._cancel_task = cancel_task
        self._task: asyncio.Task[object] | None = None
        self._cancelling = 0
        self._sent = False

    def request(self) -> None:
        """The job was cancelled: set the flag, and cancel the async handler running in the
        block (unless called from that very task: it then learns by the flag)."""
        if self.requested:
            return
        self.requested = True
        task = self._task
        if task is not None and task is not asyncio.current_task():
            self._sent = True
            task.cancel("the job was cancelled")

    def __enter__(self) -> None:
        if self.requested:
            raise HandlerCancelledError("the job was cancelled before its handler started")
        if self._cancel_task:
            task = self._task = asyncio.current_task()
            if task is not None:
                self._cancelling = task.cancelling()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        task, self._task = self._task, None
        if task is None or not self._sent:
            return
        if exc_type is None:
            task.uncancel()  # the handler swallowed our cancellation and returned
        elif issubclass(exc_type, asyncio.CancelledError) and task.uncancel() <= self._cancelling:
            raise HandlerCancelledError("the job was cancelled; its handler was") from None
