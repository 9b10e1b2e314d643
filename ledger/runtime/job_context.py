"""What a handler receives and uses: the context of its job (:class:`JobContext` for an
``async def`` handler, :class:`SyncJobContext` for a plain ``def`` one), the errors it raises to
say how its job went, and the :class:`Result` it may return.

**One set of names for both kinds of handler.** ``ctx.heartbeat()``, ``ctx.progress(...)`` and
``ctx.prerequisite_outputs()`` are awaited in an async handler and plain calls (that return
once written) in a sync one. The ``*_blocking`` twins exist for one case only: a thread that an
*async* handler starts itself, which cannot await; on a :class:`SyncJobContext` they are the
same methods under those names, so code shared by both kinds may call them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from concurrent.futures import Future
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar
from uuid import UUID

from ledger.core.errors import JobCancelledError
from ledger.core.state import JobState, Lease
from ledger.core.values import JSON, Subject, WorkflowLink
from ledger.runtime.cancellation import Cancellation

T = TypeVar("T")

ReadPrerequisites = Callable[[WorkflowLink], Awaitable[dict[str, JSON]]]
"""Reads a step's prerequisites' outputs (a coroutine the pool runs on the event loop, which
hands the read to the pool's I/O threads)."""

PERMANENT_ERROR_CODE = "job.permanent_error"
TRANSIENT_ERROR_CODE = "job.transient_error"


class PermanentError(Exception):
    """Raise from a handler when retrying cannot help (bad input, unsupported document)."""

    def __init__(self, message: str, *, code: str = PERMANENT_ERROR_CODE) -> None:
        super().__init__(message)
        self.code = code


class TransientError(Exception):
    """Raise from a handler when a later attempt may succeed (a downstream outage).

    ``not_before`` asks for the retry no earlier than that time; it can delay the retry
    beyond the backoff policy, never hasten it.
    """

    def __init__(
        self,
        message: str,
        *,
        code: str = TRANSIENT_ERROR_CODE,
        not_before: datetime | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.not_before = not_before


@dataclass(frozen=True)
class Result:
    """A handler's output plus, for a sync-subject job, what the sync state should record."""

    output: JSON | None = None
    revision: str | None = None
    content_hash: str | None = None


class _JobView:
    """What every handler sees of its job: the job itself, its lease and the pool's resources.

    Reporting goes through ``report`` (a coroutine the pool runs on the event loop, which
    hands the write to the pool's I/O threads), and reading the prerequisites' outputs
    through ``read_prerequisites`` the same way.
    """

    _cancels_task = False
    """Whether a cancel of the job cancels the task running the handler (async handlers)."""

    def __init__(
        self,
        job: JobState,
        lease: Lease,
        report: Callable[[str, dict[str, Any]], Awaitable[None]],
        loop: asyncio.AbstractEventLoop,
        resources: Mapping[str, Any] | None = None,
        *,
        read_prerequisites: ReadPrerequisites | None = None,
    ) -> None:
        self.job = job
        self.lease = lease
        self.resources: Mapping[str, Any] = resources or {}
        """What the pool was given for its handlers (clients, configured sources…)."""
        self._report = report
        self._loop = loop
        self._read_prerequisites = read_prerequisites
        self._prerequisites: dict[str, JSON] | None = None
        self.cancellation = Cancellation(cancel_task=self._cancels_task)
        """How the pool stops this handler if its job is cancelled (the runtime's, not the
        handler's: read :attr:`cancelled`)."""

    @property
    def cancelled(self) -> bool:
        """True once the pool knows this job was cancelled while its handler runs (within
        one heartbeat interval of the cancel; at once on PostgreSQL). A handler should then
        stop: its outcome will not be recorded, and its next ``progress()`` or
        ``heartbeat()`` raises :class:`~ledger.core.errors.JobCancelledError`. An async
        handler's task is cancelled as well."""
        return self.cancellation.requested

    async def _reported(self, kind: str, fields: dict[str, Any]) -> None:
        """Write one report, unless the job is known to be cancelled (then, and when the
        fence says so, :class:`JobCancelledError`)."""
        self._raise_if_cancelled()
        try:
            await self._report(kind, fields)
        except JobCancelledError:
            self.cancellation.requested = True
            raise

    def _raise_if_cancelled(self) -> None:
        if self.cancellation.requested:
            raise JobCancelledError(f"job {self.id} was cancelled: stop its handler")

    @property
    def id(self) -> UUID:
        return self.job.job_id

    @property
    def type(self) -> str:
        return self.job.job_type

    @property
    def payload(self) -> dict[str, JSON]:
        return self.job.payload

    @property
    def run(self) -> int:
        return self.job.run_number

    @property
    def attempt(self) -> int:
        return self.job.attempt

    @property
    def org(self) -> str | None:
        return self.job.org

    @property
    def subject(self) -> Subject | None:
        return self.job.subject

    @property
    def checkpoint(self) -> JSON | None:
        return self.job.checkpoint

    @property
    def workflow(self) -> WorkflowLink | None:
        """The workflow step this job runs (``run_id``, ``step_key``), ``None`` for a plain
        job. Its prerequisites' outputs: ``ctx.prerequisite_outputs()``."""
        return self.job.workflow

    async def _prerequisite_outputs(self) -> dict[str, JSON]:
        """Read once, when first asked (most handlers never ask), and kept: a step runs only
        after every prerequisite ended, so their outputs no longer change. A copy each
        time, so a handler that edits what it got cannot change what it gets next."""
        link = self.job.workflow
        if link is None:
            return {}
        if self._prerequisites is None:
            if self._read_prerequisites is None:
                raise RuntimeError("this job context was made without a ledger to read from")
            self._prerequisites = await self._read_prerequisites(link)
        return dict(self._prerequisites)

    def _report_and_wait(self, kind: str, fields: dict[str, Any]) -> None:
        """Run one report on the loop from another thread and wait until it is written."""
        self._raise_if_cancelled()  # no trip to the loop to learn it
        self._wait_on_loop(kind, lambda: self._reported(kind, fields))

    def _prerequisite_outputs_and_wait(self) -> dict[str, JSON]:
        if self.job.workflow is None:
            return {}  # no read, so no trip to the loop either
        if self._prerequisites is not None:
            return dict(self._prerequisites)
        return self._wait_on_loop("prerequisite_outputs", self._prerequisite_outputs)

    def _wait_on_loop(self, method: str, call: Callable[[], Awaitable[T]]) -> T:
        """``await call()`` on the loop from another thread, waiting for its result.

        Called on the loop's own thread this would wait for itself forever: that is a
        :class:`RuntimeError` instead."""
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is self._loop:
            raise RuntimeError(
                f"ctx.{method}_blocking() called on the event loop would deadlock it: "
                f"in an async handler use `await ctx.{method}(...)`"
            )
        future: Future[T] = asyncio.run_coroutine_threadsafe(_as_coroutine(call()), self._loop)
        return future.result()


def _progress_fields(
    done: int | None, total: int | None, stage: str | None, checkpoint: JSON | None
) -> dict[str, Any]:
    return {"done": done, "total": total, "stage": stage, "checkpoint": checkpoint}


class JobContext(_JobView):
    """The context of an ``async def`` handler: ``await ctx.progress(...)``,
    ``await ctx.heartbeat()``.

    A plain ``def`` handler gets a :class:`SyncJobContext` instead, whose same-named methods
    block. ``*_blocking`` here serve threads an async handler starts itself; called on the
    event loop's thread they raise (they would deadlock it).
    """

    _cancels_task = True

    async def heartbeat(self) -> None:
        """Renew this job's lease now (the pool also renews it periodically). Raises
        :class:`~ledger.core.errors.JobCancelledError` once the job was cancelled."""
        await self._reported("heartbeat", {})

    async def progress(
        self,
        *,
        done: int | None = None,
        total: int | None = None,
        stage: str | None = None,
        checkpoint: JSON | None = None,
    ) -> None:
        """Record progress, a stage and/or a checkpoint. Does not renew the lease. Raises
        :class:`~ledger.core.errors.JobCancelledError` once the job was cancelled."""
        await self._reported("progress", _progress_fields(done, total, stage, checkpoint))

    def heartbeat_blocking(self) -> None:
        """:meth:`heartbeat` from a thread other than the event loop's, waiting for it."""
        self._report_and_wait("heartbeat", {})

    def progress_blocking(
        self,
        *,
        done: int | None = None,
        total: int | None = None,
        stage: str | None = None,
        checkpoint: JSON | None = None,
    ) -> None:
        """:meth:`progress` from a thread other than the event loop's, waiting for it."""
        self._report_and_wait("progress", _progress_fields(done, total, stage, checkpoint))

    async def prerequisite_outputs(self) -> dict[str, JSON]:
        """``{step_key: output}`` of this workflow step's prerequisites that succeeded, in
        the order the step lists them; a prerequisite that failed or was cancelled (only an
        ``on_terminal`` dependent runs after one) is absent. Empty for a job that runs no
        step. Read from the ledger on the pool's I/O threads when first asked, then kept."""
        return await self._prerequisite_outputs()

    def prerequisite_outputs_blocking(self) -> dict[str, JSON]:
        """:meth:`prerequisite_outputs` from a thread other than the event loop's."""
        return self._prerequisite_outputs_and_wait()


class SyncJobContext(_JobView):
    """The context of a plain ``def`` handler (run on a handler thread): ``ctx.progress(...)``
    and ``ctx.heartbeat()`` write and return once written (or raise, e.g.
    :class:`~ledger.core.errors.LeaseOwnerMismatchError` when the lease is gone, its
    :class:`~ledger.core.errors.JobCancelledError` form once the job was cancelled: a
    long sync handler should report progress or check ``ctx.cancelled`` between steps).

    The write runs on the pool's I/O threads, never on the handler threads, so handlers
    waiting for their writes cannot starve them. ``*_blocking`` are the same methods under
    the names async contexts use for threads.
    """

    def heartbeat(self) -> None:
        """Renew this job's lease now (the pool also renews it periodically)."""
        self._report_and_wait("heartbeat", {})

    def progress(
        self,
        *,
        done: int | None = None,
        total: int | None = None,
        stage: str | None = None,
        checkpoint: JSON | None = None,
    ) -> None:
        """Record progress, a stage and/or a checkpoint. Does not renew the lease."""
        self._report_and_wait("progress", _progress_fields(done, total, stage, checkpoint))

    def prerequisite_outputs(self) -> dict[str, JSON]:
        """``{step_key: output}`` of this workflow step's prerequisites that succeeded, in
        the order the step lists them; a prerequisite that failed or was cancelled (only an
        ``on_terminal`` dependent runs after one) is absent. Empty for a job that runs no
        step. Read from the ledger on the pool's I/O threads when first asked (this call
        waits for it), then kept."""
        return self._prerequisite_outputs_and_wait()

    heartbeat_blocking = heartbeat
    progress_blocking = progress
    prerequisite_outputs_blocking = prerequisite_outputs


async def _as_coroutine(awaitable: Awaitable[T]) -> T:
    return await awaitable
