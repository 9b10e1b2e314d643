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
(:func:`ledger.api.worker_writes.worker_outcome_decision`), so the history says when it
stopped.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager


class HandlerCancelledError(Exception):
    """Raised out of :meth:`Cancellation.scope` when the pool cancelled the async handler
    inside it because its job was cancelled (the runtime's signal, never a handler's)."""


class Cancellation:
    """One running job's cancel: a flag a handler can read, and a handle on the task running
    an async handler. Methods are called on the event loop's thread."""

    __slots__ = ("_cancelling", "_sent", "_task", "requested")

    def __init__(self) -> None:
        self.requested = False
        """The job was cancelled (``ctx.cancelled``)."""
        self._task: asyncio.Task[object] | None = None
        self._cancelling = 0
        self._sent = False

    def request(self) -> None:
        """The job was cancelled: set the flag, and cancel the async handler running in
        :meth:`scope` (unless called from that very task: it then learns by the flag)."""
        if self.requested:
            return
        self.requested = True
        task = self._task
        if task is not None and task is not asyncio.current_task():
            self._sent = True
            task.cancel("the job was cancelled")

    @contextmanager
    def scope(self, *, cancel_task: bool) -> Iterator[None]:
        """Where the handler runs. With ``cancel_task`` (an async handler), a
        :meth:`request` cancels the current task, and the cancellation comes out as
        :class:`HandlerCancelledError`; any other cancellation (the pool stopping, the
        handler's timeout) passes through unchanged."""
        if self.requested:
            raise HandlerCancelledError("the job was cancelled before its handler started")
        task = asyncio.current_task() if cancel_task else None
        if task is not None:
            self._task = task
            self._cancelling = task.cancelling()
        try:
            yield
        except asyncio.CancelledError:
            if task is not None and self._sent and task.uncancel() <= self._cancelling:
                raise HandlerCancelledError("the job was cancelled; its handler was") from None
            raise
        else:
            if task is not None and self._sent:
                task.uncancel()  # the handler swallowed our cancellation and returned
        finally:
            self._task = None
