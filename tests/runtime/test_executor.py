"""The executor's one translation from what a handler did to what a worker records, and the
pool's settings; no database."""

from __future__ import annotations

import asyncio
import dataclasses
import threading
import typing
from datetime import UTC, datetime
from typing import Any
from uuid import uuid4

import pytest

from ledger.api.ledger import Completion, FailureReport
from ledger.core.state import JobState, Lease
from ledger.core.values import BackoffPolicy, EnqueueRequest
from ledger.runtime.config import PoolConfig, PoolSettings
from ledger.runtime.executor import Verdict, judge_raise, judge_return, run_handler
from ledger.runtime.handlers import (
    HandlerSpec,
    JobContext,
    Result,
    SyncJobContext,
    TransientError,
)
from ledger.runtime.threads import ThreadLane

LEASE = Lease(uuid4(), 1, 1, "w")
EPOCH = datetime(2026, 1, 1, tzinfo=UTC)


def context(*, sync: bool = False) -> JobContext | SyncJobContext:
    async def report(kind: str, fields: dict[str, Any]) -> None:
        return None

    job = JobState(
        job_id=LEASE.job_id,
        request=EnqueueRequest(job_type="t"),
        definition_version=1,
        priority=100,
        max_attempts=3,
        timeout_s=5.0,
        backoff=BackoffPolicy(),
        enqueued_at=EPOCH,
        run_at=EPOCH,
        updated_at=EPOCH,
        version=1,
    )
    context_type = SyncJobContext if sync else JobContext
    return context_type(job, LEASE, report, asyncio.get_running_loop())


def spec(function: Any, *, is_async: bool) -> HandlerSpec:
    return HandlerSpec(job_type="t", function=function, is_async=is_async)


def test_a_returned_value_or_result_becomes_a_completion() -> None:
    """A plain value is the output; a Result also carries revision and content hash."""
    assert judge_return({"a": 1}).outcome(LEASE) == Completion(LEASE, {"a": 1})
    result = Result(output="o", revision="r", content_hash="h")
    assert judge_return(result).outcome(LEASE) == Completion(LEASE, "o", "r", "h")


def test_an_output_that_is_not_json_is_a_terminal_invalid_output() -> None:
    """The verdict is a failure without an exception: job.invalid_output, terminal."""
    verdict = judge_return(object())
    assert verdict.raised is None and verdict.failure is not None
    assert (verdict.failure.kind, verdict.failure.code) == ("terminal", "job.invalid_output")
    assert isinstance(verdict.outcome(LEASE), FailureReport)


def test_a_transient_errors_not_before_reaches_the_failure_report() -> None:
    """TransientError(not_before=…) asks the ledger for a later retry; the report carries it."""
    later = datetime(2030, 1, 1, tzinfo=UTC)
    error = TransientError("later", not_before=later)
    verdict = judge_raise(error)
    assert verdict is not None and verdict.raised is error
    outcome = verdict.outcome(LEASE)
    assert isinstance(outcome, FailureReport) and outcome.not_before == later
    assert judge_raise(KeyboardInterrupt()) is None


async def test_run_handler_judges_sync_and_async_handlers_alike() -> None:
    """A sync handler runs off the loop's thread; both kinds' exceptions become verdicts."""

    threads: list[int] = []

    def sync_boom(ctx: SyncJobContext) -> None:
        threads.append(threading.get_ident())
        raise ValueError("boom")

    async def async_boom(ctx: JobContext) -> None:
        raise ValueError("boom")

    for handler, is_async in ((sync_boom, False), (async_boom, True)):
        lane = ThreadLane(1, "test-handler")
        verdict = await run_handler(
            spec(handler, is_async=is_async), context(sync=not is_async), 5.0, lane
        )
        assert verdict.failure is not None
        assert verdict.failure.message == "ValueError: boom"
    assert threads and threads[0] != threading.get_ident()


async def test_run_handler_applies_the_timeout_and_lets_shutdown_signals_through() -> None:
    """Past the timeout: a timeout verdict. KeyboardInterrupt: raised, not judged."""

    async def sleeps(ctx: JobContext) -> None:
        await asyncio.sleep(10)

    async def interrupted(ctx: JobContext) -> None:
        raise KeyboardInterrupt

    verdict = await run_handler(spec(sleeps, is_async=True), context(), 0.01)
    assert verdict.failure is not None and verdict.failure.code == "job.timeout_exceeded"
    with pytest.raises(KeyboardInterrupt):
        await run_handler(spec(interrupted, is_async=True), context(), 5.0)


def test_verdict_has_either_a_result_or_a_failure() -> None:
    """An empty verdict is a programming error, not a silent success."""
    with pytest.raises(AssertionError):
        Verdict().outcome(LEASE)


def test_pool_settings_name_exactly_the_pool_config_fields() -> None:
    """The keyword arguments WorkerPool and ledger.testing accept are PoolConfig's fields,
    with the same types (the TypedDict cannot drift from the dataclass)."""
    config_types = typing.get_type_hints(PoolConfig)
    assert [field.name for field in dataclasses.fields(PoolConfig)] == list(config_types)
    assert typing.get_type_hints(PoolSettings) == config_types


def test_keyword_settings_apply_over_a_config_and_unknown_ones_are_refused() -> None:
    """PoolConfig.of: keywords win over the given config; a misspelt setting is a TypeError."""
    base = PoolConfig(concurrency=3, lease_s=10.0)
    config = PoolConfig.of(base, {"concurrency": 5})
    assert (config.concurrency, config.lease_s) == (5, 10.0)
    with pytest.raises(TypeError):
        PoolConfig.of(None, {"concurency": 5})  # type: ignore[typeddict-unknown-key]
    with pytest.raises(ValueError, match="concurrency"):
        PoolConfig(concurrency=-1)
