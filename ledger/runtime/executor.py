"""Running one job: its handler under its timeout, and what that run comes to in the ledger.

:func:`run_handler` is the one translation from "the handler returned / raised" to the outcome
a worker records (a :class:`Verdict`): the pool's :class:`Executor` uses it for every claimed
job and ``jobledger replay --run`` for a local re-execution, so the two can never disagree on
how an exception is classified or which output is refused.

This module also decides where a sync handler runs (:func:`_call`): on the handler threads
the caller passes, never on the pool's I/O threads nor asyncio's default executor.

Nothing a handler does may take the worker slot down: an exception that cannot be judged (its
``__str__`` raises), ``SystemExit``, a stray ``CancelledError`` the pool did not send, or any
other failure of the machinery around the handler ends that attempt as ``panicked``
(``job.handler_panic``) and is logged; only ``KeyboardInterrupt`` (the process is being
interrupted) and the pool's own cancellation propagate.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

from ledger.api.ledger import Completion, FailureReport, LeaseLength, Ledger, Outcome
from ledger.core.errors import InvalidRequestError
from ledger.core.limits import check_code
from ledger.core.requests import check_output
from ledger.core.state import JobState, Lease
from ledger.core.values import JSON, Failure, FailureKind, WorkflowLink
from ledger.jobs.leases import lease_for
from ledger.jobs.worker_writes import CANCELLED_BY_POOL_CODE
from ledger.runtime.breaker import CircuitBreaker
from ledger.runtime.cancellation import Cancellation, HandlerCancelledError
from ledger.runtime.handlers import (
    HandlerSpec,
    JobContext,
    PermanentError,
    ReadPrerequisites,
    Registry,
    Result,
    SyncJobContext,
    TransientError,
)
from ledger.runtime.releases import Releaser
from ledger.runtime.retrying import written
from ledger.runtime.threads import ThreadLane
from ledger.runtime.tracing import record_outcome, run_span

log = logging.getLogger(__name__)

HANDLER_ERROR_CODE = "job.handler_error"
TIMEOUT_CODE = "job.timeout_exceeded"
PANIC_CODE = "job.handler_panic"
NOT_REGISTERED_CODE = "job.handler_not_registered"
INVALID_OUTPUT_CODE = "job.invalid_output"
INVALID_CODE_CODE = "job.invalid_failure_code"
"""Stands in for a code a handler's PermanentError/TransientError gave that cannot be stored."""

_CANCELLED_BY_POOL = Failure(
    kind=FailureKind.TERMINAL,
    code=CANCELLED_BY_POOL_CODE,
    message="the job was cancelled while its handler ran: the pool cancelled the handler",
)
"""What an async handler the pool cancelled comes to; never recorded as a failure (its job is
cancelled: the outcome becomes ``job_handler_stopped``, how ``cancelled``)."""


def describe(exc: BaseException) -> str:
    """``Type: message`` for a failure report, even for an exception whose ``str()`` raises."""
    try:
        return f"{type(exc).__name__}: {exc}"
    except Exception as failed:
        return f"{type(exc).__name__} (its str() raised {type(failed).__name__})"


def panic(exc: BaseException, context: str = "") -> Failure:
    """The ``panicked`` failure for a crash of a handler or of the machinery around it."""
    return Failure(kind=FailureKind.PANICKED, code=PANIC_CODE, message=context + describe(exc))


def classify(exc: BaseException) -> Failure | None:
    """The failure a handler's exception stands for; ``None`` for the runtime's own signals.

    ``KeyboardInterrupt`` (the process is being interrupted) and ``CancelledError`` (the pool
    cancels the slot at shutdown) are never classified: they propagate, and the job stays
    leased for a release or the reaper. ``SystemExit`` from a handler is the handler's crash
    (a library calling ``sys.exit``), not a request to stop the worker: ``panicked``. An
    explicit PermanentError/TransientError wins; a timeout is ``timeout``; any other
    ``Exception`` is treated as transient.
    """
    if isinstance(exc, KeyboardInterrupt | asyncio.CancelledError):
        return None
    if isinstance(exc, PermanentError):
        return _explicit(FailureKind.TERMINAL, exc.code, exc)
    if isinstance(exc, TransientError):
        return _explicit(FailureKind.RETRYABLE, exc.code, exc)
    if isinstance(exc, TimeoutError):
        return Failure(kind=FailureKind.TIMEOUT, code=TIMEOUT_CODE, message=str(exc) or "timed out")
    if isinstance(exc, Exception):
        return Failure(
            kind=FailureKind.RETRYABLE,
            code=HANDLER_ERROR_CODE,
            message=f"{type(exc).__name__}: {exc}",
        )
    # SystemExit and any other BaseException (GeneratorExit, a custom one) are a crash
    # rather than a verdict on the job.
    return panic(exc)


def _explicit(kind: FailureKind, code: object, exc: BaseException) -> Failure:
    """The failure a handler asked for. A code the ledger would refuse (empty, too long,
    outside the code charset) must not make the whole outcome unrecordable — the job would
    sit leased until reaped — so it is replaced by :data:`INVALID_CODE_CODE`, the kind kept,
    and the message says what the handler gave."""
    message = str(exc)  # if this raises, the executor ends the attempt as panicked
    try:
        check_code(code)
    except InvalidRequestError as refused:
        return Failure(kind=kind, code=INVALID_CODE_CODE, message=f"{message} [{refused}]")
    assert isinstance(code, str)
    return Failure(kind=kind, code=code, message=message)


@dataclass(frozen=True)
class Verdict:
    """What one run of a handler came to.

    Exactly one of ``result`` (it returned a JSON output) and ``failure`` is set. ``raised``
    is the exception behind a failure, ``None`` when the handler returned an output that is
    not JSON (``job.invalid_output``).
    """

    result: Result | None = None
    failure: Failure | None = None
    raised: BaseException | None = None
    not_before: datetime | None = None
    """A TransientError's earliest retry time."""

    def outcome(self, lease: Lease) -> Outcome:
        """What a worker holding ``lease`` records for this run."""
        if self.failure is not None:
            return FailureReport(lease, self.failure, self.not_before)
        assert self.result is not None
        return Completion(lease, self.result.output, self.result.revision, self.result.content_hash)


_RETURNED_NOTHING = Verdict(result=Result())
"""The verdict on a handler that returned ``None`` (the commonest return, and valid JSON), built
once rather than per job."""


def judge_return(value: Any) -> Verdict:
    """A returned value: its output (a :class:`Result`'s, or the value itself), refused as the
    job's terminal failure if it is not JSON — one bad output must not sink a batch."""
    if value is None:
        return _RETURNED_NOTHING
    result = value if isinstance(value, Result) else Result(output=value)
    try:
        check_output(result.output)
    except InvalidRequestError as invalid:
        failure = Failure(
            kind=FailureKind.TERMINAL, code=INVALID_OUTPUT_CODE, message=invalid.message
        )
        return Verdict(failure=failure)
    return Verdict(result=result)


def judge_raise(exc: BaseException) -> Verdict | None:
    """A raised exception as a failure; ``None`` for the runtime's own signals (see
    :func:`classify`)."""
    failure = classify(exc)
    if failure is None:
        return None
    not_before = exc.not_before if isinstance(exc, TransientError) else None
    return Verdict(failure=failure, raised=exc, not_before=not_before)


HandlerContext = JobContext | SyncJobContext
Report = Callable[[str, dict[str, Any]], Awaitable[None]]


@dataclass
class KnownState:
    """A running job's state as this process's last write of it returned it (its start's,
    then each report's): what the next report and the outcome are decided on first, without
    a read (:func:`ledger.jobs.worker_writes.write_known`). Stale after a write of another
    (the pool's lease renewals, an operator's cancel): the write then decides again on the
    stored state and returns it."""

    state: JobState


def context_for(
    spec: HandlerSpec,
    job: JobState,
    lease: Lease,
    report: Report,
    resources: Mapping[str, Any] | None = None,
    *,
    read_prerequisites: ReadPrerequisites | None = None,
) -> HandlerContext:
    """The context ``spec``'s handler gets (call on the running loop): awaitable reports for
    an async handler, blocking ones for a sync handler. Without ``read_prerequisites`` a
    workflow step's ``ctx.prerequisite_outputs()`` raises (there is no ledger to read)."""
    context_type = JobContext if spec.is_async else SyncJobContext
    loop = asyncio.get_running_loop()
    return context_type(job, lease, report, loop, resources, read_prerequisites=read_prerequisites)


async def run_handler(
    spec: HandlerSpec,
    context: HandlerContext,
    timeout_s: float,
    threads: ThreadLane | None = None,
) -> Verdict:
    """Run the handler once under ``timeout_s`` and judge what it did; a sync handler runs on
    ``threads`` (by default a one-thread lane of its own, let go afterwards).

    ``KeyboardInterrupt`` and a cancellation of the calling task propagate unjudged: the
    caller decides what becomes of the lease. An exception that cannot even be judged is a
    ``panicked`` verdict.
    """
    lane = threads or ThreadLane(1, "jobledger-handler")
    try:
        # asyncio.timeout, not wait_for: no extra task, so exceptions reach us unchanged.
        async with asyncio.timeout(timeout_s):
            with context.cancellation:
                value = await _call(spec, context, lane)
    except BaseException as exc:
        if isinstance(exc, HandlerCancelledError):
            return Verdict(failure=_CANCELLED_BY_POOL, raised=exc)
        if isinstance(exc, asyncio.CancelledError) and not _being_cancelled():
            # The handler's own CancelledError (an awaited task cancelled elsewhere), not
            # the pool stopping this slot: a crash of the handler.
            return Verdict(failure=panic(exc, "not cancelled by the pool: "), raised=exc)
        try:
            verdict = judge_raise(exc)
        except Exception as judging:
            return Verdict(failure=panic(exc, f"unjudgeable ({describe(judging)}): "), raised=exc)
        if verdict is None:
            raise
        return verdict
    finally:
        if threads is None:
            lane.shutdown()
    return judge_return(value)


def _being_cancelled() -> bool:
    task = asyncio.current_task()
    return task is None or task.cancelling() > 0


async def _call(spec: HandlerSpec, context: HandlerContext, threads: ThreadLane) -> Any:
    """The handler itself: awaited if async, else run on a handler thread so it cannot stall
    the loop (a thread of the handlers' own lane: see :mod:`ledger.runtime.threads`)."""
    if spec.is_async:
        return await spec.function(context)  # type: ignore[arg-type]
    return await threads.run(spec.function, context)  # type: ignore[arg-type]


HANDLER_CALL = _call.__code__
"""The code of the frame that calls a handler (its ``context`` local names the job): what
:class:`~ledger.runtime.loop_watch.LoopWatch` looks for on a blocked loop's stack."""


class Executor:
    """Runs a pool's claimed jobs: the handler lookup, the context, the run, the breaker.

    :meth:`execute` returns the outcome to record and records nothing itself, so the pool can
    batch it and a test can record it at once. If the running task is cancelled, the job is
    released (through the :class:`Releaser`, shielded) before the cancellation propagates.
    Sync handlers run on ``handler_threads``; their reports (progress, heartbeat) are written
    and their prerequisites' outputs read on ``io_threads``.
    """

    def __init__(
        self,
        ledger: Ledger,
        registry: Registry,
        *,
        breaker: CircuitBreaker,
        releaser: Releaser,
        lease_s: LeaseLength,
        resources: Mapping[str, Any],
        handler_threads: ThreadLane,
        io_threads: ThreadLane,
    ) -> None:
        self._ledger = ledger
        self._handler_threads = handler_threads
        self._io = io_threads
        self._registry = registry
        self._breaker = breaker
        self._releaser = releaser
        self._lease_s = lease_s
        self.resources = resources
        self._longest: dict[str, timedelta] = {}
        """Per job type, how long a report's write is retried (its lease's length)."""
        self._readers: dict[str, ReadPrerequisites] = {}
        """Per job type, the prerequisites' reader its contexts get (it needs no lease)."""
        self._running: dict[UUID, Cancellation] = {}
        """The jobs whose handler runs now, and how to stop each (:meth:`cancel`)."""

    def cancel(self, job_id: UUID) -> bool:
        """Stop ``job_id``'s running handler because its job was cancelled
        (:mod:`ledger.runtime.cancellation`); false if none of this pool's runs it."""
        cancellation = self._running.get(job_id)
        if cancellation is None:
            return False
        cancellation.request()
        return True

    async def execute(self, job: JobState, known: KnownState | None = None) -> Outcome:
        """Run ``job``'s handler (the job's own ``timeout_s``) and return its outcome;
        ``known`` (the job's state after its start, if the caller holds it) is kept up to
        date by the handler's reports."""
        lease = job.lease
        assert lease is not None, "only leased jobs are executed"
        spec = self._registry.get(job.job_type)
        if spec is None:
            missing = Failure(
                kind=FailureKind.TERMINAL,
                code=NOT_REGISTERED_CODE,
                message=f"no handler is registered for job type {job.job_type!r}",
            )
            return FailureReport(lease, missing)
        try:
            with run_span(job) as span:
                verdict, cancelled = await self._run(spec, job, lease, known)
                record_outcome(span, verdict.failure)
        except asyncio.CancelledError:
            await self._releaser.release_shielded(lease)
            raise
        except KeyboardInterrupt:
            raise
        except BaseException as exc:  # the machinery around the handler failed
            verdict = Verdict(failure=panic(exc, "worker machinery failed: "), raised=exc)
            cancelled = False
        if cancelled:
            # Says nothing of the job type's downstream: the breaker is not told.
            log.info("job %s was cancelled while running: its handler stopped", job.job_id)
            return verdict.outcome(lease)
        if verdict.failure is not None and verdict.failure.kind is FailureKind.PANICKED:
            log.error("job %s panicked: %s", job.job_id, verdict.failure.message)
        self._inform_breaker(job.job_type, verdict)
        return verdict.outcome(lease)

    async def _run(
        self, spec: HandlerSpec, job: JobState, lease: Lease, known: KnownState | None
    ) -> tuple[Verdict, bool]:
        """The handler's verdict, and whether its job was cancelled while it ran."""
        report = self._reporter(lease, job.job_type, known)
        reads = self._prerequisite_reader(job.job_type)
        context = context_for(spec, job, lease, report, self.resources, read_prerequisites=reads)
        self._running[job.job_id] = context.cancellation
        try:
            verdict = await run_handler(spec, context, job.timeout_s, self._handler_threads)
        finally:
            self._running.pop(job.job_id, None)
        return verdict, context.cancellation.requested

    def _inform_breaker(self, job_type: str, verdict: Verdict) -> None:
        """Retryable failures count against the type's downstream, a success clears the
        count; terminal failures (a permanent error, an invalid output, a panic) are about
        the job and do neither (a half-open breaker's next probe may go at once)."""
        if verdict.failure is None:
            self._breaker.record_success(job_type)
        elif verdict.failure.kind.is_retryable:
            self._breaker.record_failure(job_type)
        else:
            self._breaker.record_ended(job_type)

    def _retry_span(self, job_type: str) -> timedelta:
        longest = self._longest.get(job_type)
        if longest is None:
            longest = timedelta(seconds=lease_for(self._lease_s, job_type))
            self._longest[job_type] = longest
        return longest

    def _prerequisite_reader(self, job_type: str) -> ReadPrerequisites:
        reader = self._readers.get(job_type)
        if reader is None:
            reader = self._readers[job_type] = self._new_prerequisite_reader(job_type)
        return reader

    def _new_prerequisite_reader(self, job_type: str) -> ReadPrerequisites:
        # Reading is always safe to try again: a blip is retried as a report's write is.
        longest = self._retry_span(job_type)

        async def read_prerequisites(link: WorkflowLink) -> dict[str, JSON]:
            async def read() -> dict[str, JSON]:
                handle = self._ledger.workflows.handle(link.run_id)
                return await self._io.run(handle.prerequisite_outputs, link.step_key)

            what = f"prerequisites of step {link.step_key!r} of run {link.run_id}"
            return await written(read, what=what, clock=self._ledger.clock, lease=longest)

        return read_prerequisites

    def _reporter(self, lease: Lease, job_type: str, known: KnownState | None) -> Report:
        # A database blip while a handler reports must not fail the handler: the write is
        # retried (fenced, so safely) while the lease may live, as outcomes are.
        longest = self._retry_span(job_type)

        async def report(kind: str, fields: dict[str, Any]) -> None:
            async def write() -> None:
                if kind == "heartbeat":
                    state = await self._io.run(self._ledger.heartbeat, lease, lease_s=self._lease_s)
                elif known is not None:
                    # Decided on the state the last write returned: on PostgreSQL one
                    # statement that leaves the row behind (ledger.views.queue_lag).
                    state = await self._io.run(self._ledger.progress_known, known.state, **fields)
                else:
                    state = await self._io.run(self._ledger.progress, lease, **fields)
                if known is not None:
                    known.state = state

            what = f"{kind} of job {lease.job_id}"
            await written(write, what=what, clock=self._ledger.clock, lease=longest)

        return report
