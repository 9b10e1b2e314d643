"""The job context's ``prerequisite_outputs()``: read only when asked, once per attempt, a
copy each time, through the reader the pool gives it (here one that counts; the read itself
runs against real stores in tests/workflows/test_workflow_handler_inputs.py)."""

from __future__ import annotations

import asyncio
from typing import Any
from uuid import uuid4

import pytest
from msgspec.structs import replace
from test_executor import LEASE, context, spec

from ledger.core.values import JSON, WorkflowLink
from ledger.runtime.executor import run_handler
from ledger.runtime.handlers import JobContext, SyncJobContext

LINK = WorkflowLink(run_id=uuid4(), step_key="sink")
OUTPUTS: dict[str, JSON] = {"a": {"n": 1}, "b": None}


class CountingReader:
    def __init__(self) -> None:
        self.reads: list[WorkflowLink] = []

    async def __call__(self, link: WorkflowLink) -> dict[str, JSON]:
        self.reads.append(link)
        return dict(OUTPUTS)


def step_context(
    reader: CountingReader | None, *, sync: bool = False, link: WorkflowLink | None = LINK
) -> JobContext | SyncJobContext:
    plain = context(sync=sync)
    job = replace(plain.job, workflow=link)
    return type(plain)(
        job, LEASE, plain._report, asyncio.get_running_loop(), read_prerequisites=reader
    )


async def test_an_async_context_reads_once_when_first_asked_and_hands_out_copies() -> None:
    """Nothing is read until asked; two asks make one read of the step's link; editing what
    came back does not change the next answer."""
    reader = CountingReader()
    ctx = step_context(reader)
    assert isinstance(ctx, JobContext)
    assert reader.reads == []
    first = await ctx.prerequisite_outputs()
    first["a"] = "edited"
    assert await ctx.prerequisite_outputs() == OUTPUTS
    assert reader.reads == [LINK]


async def test_a_sync_handler_reads_through_the_loop_from_its_handler_thread() -> None:
    """A sync handler's ``ctx.prerequisite_outputs()`` blocks on its thread until the
    loop-side read answers; asked twice, one read."""
    reader = CountingReader()

    def handler(ctx: SyncJobContext) -> Any:
        return {"first": ctx.prerequisite_outputs(), "again": ctx.prerequisite_outputs()}

    verdict = await run_handler(spec(handler, is_async=False), step_context(reader, sync=True), 5.0)
    assert verdict.result is not None
    assert verdict.result.output == {"first": OUTPUTS, "again": OUTPUTS}
    assert reader.reads == [LINK]


@pytest.mark.parametrize("sync", [False, True], ids=["async", "sync"])
async def test_a_plain_jobs_context_answers_empty_without_reading(sync: bool) -> None:
    """No workflow link: ``{}``, and the reader is never called."""
    reader = CountingReader()
    ctx = step_context(reader, sync=sync, link=None)
    if isinstance(ctx, JobContext):
        assert await ctx.prerequisite_outputs() == {}
    else:
        assert await asyncio.to_thread(ctx.prerequisite_outputs) == {}
    assert reader.reads == []


async def test_a_step_context_made_without_a_reader_says_so() -> None:
    """A context built without the pool's reader (a local re-execution) raises rather than
    answer ``{}`` for a step that has prerequisites."""
    ctx = step_context(None)
    assert isinstance(ctx, JobContext)
    with pytest.raises(RuntimeError, match="without a ledger"):
        await ctx.prerequisite_outputs()
