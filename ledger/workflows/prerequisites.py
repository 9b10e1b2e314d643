"""What a workflow step's handler reads of its prerequisites: the outputs of those that
succeeded (``ctx.prerequisite_outputs()``, docs/workflows.md#in-a-handler).

Two primary-key reads of the workflow view's step rows in one snapshot: the step's own row
(its prerequisites are in its frozen request, not in a column), then the prerequisites'
rows. Neither grows with the run. A step is released only once every prerequisite ended,
so what this reads for a running step's job no longer changes.
"""

from __future__ import annotations

from ledger.core.values import JSON, WorkflowLink
from ledger.core.workflows.errors import WorkflowNotFoundError
from ledger.core.workflows.state import StepState
from ledger.core.workflows.status import StepStatus
from ledger.store.reads import ReadSnapshot
from ledger.store.store import Store
from ledger.views.workflows import decode_step


def prerequisite_outputs(store: Store, link: WorkflowLink) -> dict[str, JSON]:
    """``{step_key: output}`` of the prerequisites of ``link``'s step that succeeded (an
    output may be ``None``), in the order the step lists them. A prerequisite that failed
    or was cancelled (only an ``on_terminal`` dependent runs after one) is absent."""
    with store.read_snapshot() as snapshot:
        own = _steps(snapshot, link, [link.step_key]).get(link.step_key)
        if own is None:
            raise WorkflowNotFoundError(f"no step {link.step_key!r} in workflow run {link.run_id}")
        keys = [dependency.step for dependency in own.request.depends_on]
        found = _steps(snapshot, link, keys) if keys else {}
    return {
        key: found[key].output
        for key in keys
        if key in found and found[key].status is StepStatus.SUCCEEDED
    }


def _steps(snapshot: ReadSnapshot, link: WorkflowLink, keys: list[str]) -> dict[str, StepState]:
    params = {"run_id": snapshot.ids.key(link.run_id), "step_keys": snapshot.ids.values(keys)}
    rows = snapshot.fetch("workflow_steps_get", params)
    steps = (decode_step(bytes(row["state"])) for row in rows)
    return {step.key: step for step in steps}
