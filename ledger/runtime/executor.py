"""Running one job: its handler under its timeout, and what that run comes to in the ledger.

:func:`run_handler` is the one translation from "the handler returned / raised" to the outcome
a worker records (a :class:`Verdict`): the pool's :class:`Executor` uses it for every claimed
job and ``jobledger replay --run`` for a local re-execution, so the two can never disagree on
how an exception is classified or which output is refused.

This module also decides where a sync handler runs (:func:`_call`); the pool's own database
calls run elsewhere (``asyncio.to_thread`` in the pieces that make them).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ledger.api.ledger import Completion, FailureReport, LeaseLength, Ledger, Outcome
from ledger.core.errors import InvalidRequestError
from ledger.core.events import Failure, FailureKind
from ledger.core.requests import check_output
from ledger.core.state import JobState, Lease
from ledger.runtime.breaker import CircuitBreaker
from ledger.runtime.handlers import (
    HandlerSpec,
    JobContext,
    PermanentError,
    Registry,
    Result,
    TransientError,
)
from ledger.runtime.releases import Releaser

HANDLER_ERROR_CODE = "job.handler_error"
TIMEOUT_CODE = "job.timeout_exceeded"
PANIC_CODE = "job.handler_panic"
NOT_REGISTERED_CODE = "job.handler_not_registered"
INVALID_OUTPUT_CODE = "job.invalid_output"


def classify(exc: BaseException) -> Failure | None:
    """The failure a handler's exception stands for; ``None`` for the runtime's own signals.

    ``KeyboardInterrupt``, ``SystemExit`` and ``CancelledError`` mean the runtime is shutting
    down: they are never classified, they propagate, and the job stays leased for a release
    or the reaper. An explicit PermanentError/TransientError wins; a timeout is ``timeout``;
    any other ``Exception`` is treated as transient.
    """
    if isinstance(exc, KeyboardInterrupt | SystemExit | asyncio.CancelledError):
        return None
    if isinstance(exc, PermanentError):
        return Failure(kind=FailureKind.TERMINAL, code=exc.code, message=str(exc))
    if isinstance(exc, TransientError):
        return Failure(kind=FailureKind.RETRYABLE, code=exc.code, message=str(exc))
    if isinstance(exc, TimeoutError):
        return Failure(kind=FailureKind.TIMEOUT, code=TIMEOUT_CODE, message=str(exc) or "timed out")
    if isinstance(exc, Exception):
        return Failure(
            kind=FailureKind.RETRYABLE,
            code=HANDLER_ERROR_CODE,
            message=f"{type(exc).__name__}: {exc}",
        )
    # Any other BaseException (GeneratorExit, a custom BaseException) is a crash of the
    # machinery rather than a verdict on the job.
    return Failure(
        kind=FailureKind.PANICKED, code=PANIC_CODE, message=f"{type(exc).__name__}: {exc}"
    )


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


def judge_return(value: Any) -> Verdict:
    """A returned value: its output (a :class:`Result`'s, or the value itself), refused as the
    job's terminal failure if it is not JSON — one bad output must not sink a batch."""
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


async def run_handler(spec: HandlerSpec, context: JobContext, timeout_s: float) -> Verdict:
    """Run the handler once under ``timeout_s`` and judge what it did.

    Shutdown signals (``KeyboardInterrupt``, ``SystemExit``, ``CancelledError``) propagate
    unjudged: the caller decides what becomes of the lease.
    """
    try:
        # asyncio.timeout, not wait_for: no extra task, so exceptions reach us unchanged.
        async with asyncio.timeout(timeout_s):
            value = await _call(spec, context)
    except BaseException as exc:
        verdict = judge_raise(exc)
        if verdict is None:
            raise
        return verdict
    return judge_return(value)


async def _call(spec: HandlerSpec, context: JobContext) -> Any:
    """The handler itself: awaited if async, else run in a thread so it cannot stall the loop.

    Sync handlers share asyncio's default executor with the pool's own database calls (a
    known defect, next to be fixed here: they get an executor of their own).
    """
    if spec.is_async:
        return await spec.function(context)
    return await asyncio.to_thread(spec.function, context)


Report = Callable[[str, dict[str, Any]], Awaitable[None]]


class Executor:
    """Runs a pool's claimed jobs: the handler lookup, the context, the run, the breaker.

    :meth:`execute` returns the outcome to record and records nothing itself, so the pool can
    batch it and a test can record it at once. If the running task is cancelled, the job is
    released (through the :class:`Releaser`, shielded) before the cancellation propagates.
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
    ) -> None:
        self._ledger = ledger
        self._registry = registry
        self._breaker = breaker
        self._releaser = releaser
        self._lease_s = lease_s
        self.resources = resources

    async def execute(self, job: JobState) -> Outcome:
        """Run ``job``'s handler (the job's own ``timeout_s``) and return its outcome."""
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
        context = JobContext(
            job, lease, self._reporter(lease), asyncio.get_running_loop(), self.resources
        )
        try:
            verdict = await run_handler(spec, context, job.timeout_s)
        except asyncio.CancelledError:
            await self._releaser.release_shielded(lease)
            raise
        self._inform_breaker(verdict)
        return verdict.outcome(lease)

    def _inform_breaker(self, verdict: Verdict) -> None:
        """Retryable failures count against downstream, a success clears the count; terminal
        failures (a permanent error, an invalid output) are about the job and do neither."""
        if verdict.failure is None:
            self._breaker.record_success()
        elif verdict.failure.kind.is_retryable:
            self._breaker.record_failure()

    def _reporter(self, lease: Lease) -> Report:
        async def report(kind: str, fields: dict[str, Any]) -> None:
            if kind == "heartbeat":
                await asyncio.to_thread(self._ledger.heartbeat, lease, lease_s=self._lease_s)
            else:
                await asyncio.to_thread(self._ledger.progress, lease, **fields)

        return report
