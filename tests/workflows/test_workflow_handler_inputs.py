"""A step's handler reads its prerequisites' outputs from its context
(``ctx.prerequisite_outputs()``), async and sync, on both backends, worked by a real pool:
the succeeded prerequisites' outputs in the step's order; a failed one absent; a plain job
none."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from store_helpers import assert_history_holds, ext, job, registry, spec

from ledger import Ledger
from ledger.core.values import JSON
from ledger.core.workflows.status import RunStatus
from ledger.runtime.handlers import JobContext, Registry, SyncJobContext
from ledger.testing import drain, run_until_idle


@pytest.fixture
def wf(ledger: Ledger) -> Ledger:
    ledger.define("work", max_attempts=2)
    ledger.define("join")
    return ledger


def with_async_join(handlers: Registry) -> Registry:
    """``join`` returns what its context read: its prerequisites' outputs and its link."""

    @handlers.handler("join")
    async def join(ctx: JobContext) -> JSON:
        outputs = await ctx.prerequisite_outputs()
        return {"inputs": outputs, "order": list(outputs), "step": _step(ctx)}

    return handlers


def with_sync_join(handlers: Registry) -> Registry:
    @handlers.handler("join")
    def join(ctx: SyncJobContext) -> JSON:
        outputs = ctx.prerequisite_outputs()
        return {"inputs": outputs, "order": list(outputs), "step": _step(ctx)}

    return handlers


def _step(ctx: JobContext | SyncJobContext) -> str | None:
    return None if ctx.workflow is None else ctx.workflow.step_key


FAN_IN = spec(
    job("b"),
    job("a"),
    job("sink", "a", "b", job_type="join"),
    result_step="sink",
)


@pytest.mark.parametrize("with_join", [with_async_join, with_sync_join], ids=["async", "sync"])
async def test_a_fan_in_steps_handler_sees_both_prerequisites_outputs(
    wf: Ledger, with_join: Any
) -> None:
    """a, b -> sink: sink's handler (async or sync) gets ``{a: …, b: …}`` in the order sink
    lists them, under a real WorkerPool."""
    started = wf.workflows.submit(FAN_IN)
    stats = await run_until_idle(wf, with_join(registry()), concurrency=4)
    assert stats.succeeded == 3
    handle = wf.workflows.handle(started.run_id)
    assert handle.status() is RunStatus.SUCCEEDED
    assert handle.result() == {
        "inputs": {"a": {"key": "a"}, "b": {"key": "b"}},
        "order": ["a", "b"],
        "step": "sink",
    }
    assert handle.prerequisite_outputs("sink") == {"a": {"key": "a"}, "b": {"key": "b"}}
    assert handle.prerequisite_outputs("a") == {}
    assert_history_holds(wf)


@pytest.mark.parametrize("with_join", [with_async_join, with_sync_join], ids=["async", "sync"])
async def test_a_plain_job_has_no_prerequisite_outputs(wf: Ledger, with_join: Any) -> None:
    """A job that runs no step reads an empty mapping (and no workflow link)."""
    job_id = wf.enqueue("join", {}).job_id
    await run_until_idle(wf, with_join(Registry()), concurrency=2)
    done = wf.get(job_id)
    assert done is not None and done.output == {"inputs": {}, "order": [], "step": None}


async def test_an_on_terminal_dependent_of_a_failed_prerequisite_sees_it_absent(
    wf: Ledger,
) -> None:
    """bad (dead-lettered) and good -> cleanup (on_terminal of bad, on_success of good):
    cleanup runs and sees only good's output; bad is absent, not ``None``."""
    started = wf.workflows.submit(
        spec(job("bad"), job("good"), job("cleanup", "bad:t", "good", job_type="join"))
    )
    await drain(wf, with_async_join(registry(failing=frozenset({"bad"}))))
    steps = {step.key: step for step in wf.workflows.handle(started.run_id).steps()}
    assert steps["bad"].status.value == "failed"
    assert steps["cleanup"].output == {
        "inputs": {"good": {"key": "good"}},
        "order": ["good"],
        "step": "cleanup",
    }
    assert_history_holds(wf)


async def test_an_external_prerequisites_output_and_a_none_output_are_read_too(
    wf: Ledger,
) -> None:
    """A gate completed with an output gives it; a prerequisite that succeeded with no
    output is present with ``None``."""
    handlers = with_async_join(Registry())

    @handlers.handler("work")
    def work(ctx: SyncJobContext) -> None:
        return None

    started = wf.workflows.submit(
        spec(ext("gate"), job("quiet"), job("after", "gate", "quiet", job_type="join"))
    )
    wf.workflows.complete_step(started.run_id, "gate", True, output={"by": "ann"})
    await drain(wf, handlers)
    after = {step.key: step for step in wf.workflows.handle(started.run_id).steps()}["after"]
    assert after.output is not None
    assert after.output["inputs"] == {"gate": {"by": "ann"}, "quiet": None}


async def test_an_async_handler_reads_them_blocking_from_its_own_thread_not_on_the_loop(
    wf: Ledger,
) -> None:
    """``prerequisite_outputs_blocking`` serves a thread the handler starts; on the loop's
    own thread it raises rather than deadlock, and that does not spoil a later read."""
    handlers = registry()

    @handlers.handler("join")
    async def join(ctx: JobContext) -> JSON:
        try:
            ctx.prerequisite_outputs_blocking()
        except RuntimeError as refused:
            on_loop = str(refused)
        from_thread = await asyncio.to_thread(ctx.prerequisite_outputs_blocking)
        return {"refused": on_loop, "from_thread": from_thread}

    started = wf.workflows.submit(FAN_IN)
    await drain(wf, handlers)
    result = wf.workflows.handle(started.run_id).result()
    assert result is not None
    assert "would deadlock" in result["refused"]
    assert result["from_thread"] == {"a": {"key": "a"}, "b": {"key": "b"}}
