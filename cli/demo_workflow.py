"""The demo's workflow: three regional fetches fanned out, a merge as their fan-in (it
reads their outputs from its context), an approval gate the demo completes itself, then a
publish whose output is the run's result.

Its job steps run on the demo's own worker pool with the mix; the gate, an external step,
waits until :func:`approve_when_waiting` completes it (what a person would do with
``jobledger workflow complete RUN approve --status succeeded``).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from ledger.api.ledger import Ledger
from ledger.core.workflows.status import StepStatus
from ledger.runtime.handlers import JobContext, Registry

REGIONS = ("eu", "us", "apac")
GATE = "approve"
WORKFLOW_TYPE = "demo.daily-sales"
JOB_STEPS = len(REGIONS) + 2
"""The workflow's job steps (the fetches, the merge, the publish): jobs the pool works."""


def register(registry: Registry) -> None:
    """Add the workflow's handlers to the demo's registry."""

    @registry.handler("demo.fetch", max_attempts=3)
    async def fetch(ctx: JobContext) -> dict[str, Any]:
        await asyncio.sleep(0.002)
        region = str(ctx.payload["region"])
        return {"region": region, "rows": 100 * (1 + REGIONS.index(region))}

    @registry.handler("demo.merge", max_attempts=3)
    async def merge(ctx: JobContext) -> dict[str, Any]:
        fetched = await ctx.prerequisite_outputs()  # {"fetch-eu": {"region": …, "rows": …}, …}
        rows = sum(int(output["rows"]) for output in fetched.values() if isinstance(output, dict))
        return {"regions": len(fetched), "rows": rows}

    @registry.handler("demo.publish", max_attempts=3)
    async def publish(ctx: JobContext) -> dict[str, Any]:
        await asyncio.sleep(0.002)
        return {"published": str(ctx.payload["report"])}


def request() -> dict[str, Any]:
    """The run's spec, in the JSON shape ``jobledger workflow start`` reads."""
    fetches = [f"fetch-{region}" for region in REGIONS]
    return {
        "workflow_type": WORKFLOW_TYPE,
        "result_step": "publish",
        "steps": [
            *(
                {"kind": "job", "key": key, "job_type": "demo.fetch", "payload": {"region": r}}
                for key, r in zip(fetches, REGIONS, strict=True)
            ),
            {
                "kind": "job",
                "key": "merge",
                "job_type": "demo.merge",
                "depends_on": [{"step": key} for key in fetches],
            },
            {"kind": "external", "key": GATE, "depends_on": [{"step": "merge"}]},
            {
                "kind": "job",
                "key": "publish",
                "job_type": "demo.publish",
                "payload": {"report": "daily-sales"},
                "depends_on": [{"step": GATE}],
            },
        ],
    }


def approve_when_waiting(ledger: Ledger, run_id: UUID) -> bool:
    """Complete the gate if it is waiting; whether the run has finished."""
    steps = {step.key: step for step in ledger.workflows.handle(run_id).steps()}
    if steps[GATE].status is StepStatus.WAITING_FOR_EXTERNAL:
        ledger.workflows.complete_step(
            run_id, GATE, True, output={"approved_by": "demo"}, reason="the demo approves"
        )
    return ledger.workflows.handle(run_id).status().is_finished


@dataclass
class WorkflowSummary:
    run_id: str
    status: str
    steps: int
    result: Any


def summarise(ledger: Ledger, run_id: UUID) -> WorkflowSummary:
    view = ledger.workflows.handle(run_id).view()
    return WorkflowSummary(str(run_id), view.status.value, view.step_count, view.result)
