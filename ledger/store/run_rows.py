"""The rows a workflow run's append writes: the run's, and those of the steps it changed
(the run kind's write hook; see :mod:`ledger.views.kind`)."""

from __future__ import annotations

from uuid import UUID

from ledger.core.workflows.state import RunState
from ledger.store.ids import IdAdapter
from ledger.store.run_reads import LoadedRun
from ledger.views.workflows import run_row, step_row
from ledger.views.writes import ViewWrite


def run_writes(
    runs: dict[UUID, RunState], known: dict[UUID, LoadedRun], ids: IdAdapter
) -> list[ViewWrite]:
    """Each changed run's row, and the rows of the steps whose state changed (a step's end
    writes the run, that step and the dependents it counted down or released); ``known``
    (what the unit of work read or wrote of each run) is brought up to the new states."""
    writes = []
    for run_id, state in runs.items():
        key = ids.key(run_id)
        loaded = known.get(run_id)
        submitted = loaded.submitted if loaded is not None else len(state.request.steps)
        writes.append(ViewWrite("workflow_run_upsert", run_row(state, key, submitted)))
        read = loaded.steps if loaded is not None else {}
        read_dependents = loaded.state.dependents if loaded is not None else {}
        for step_key, step in state.steps.items():
            # An append adds dependents to steps it does not otherwise change.
            if read.get(step_key) is step and (
                read_dependents.get(step_key) == state.dependents[step_key]
            ):
                continue
            job_key = None if step.job_id is None else ids.key(step.job_id)
            row = step_row(key, step, state.dependents[step_key], job_key)
            writes.append(ViewWrite("workflow_step_upsert", row))
        known[run_id] = LoadedRun(state, dict(state.steps), submitted)
    return writes
