"""The workflow view: one row per run (``jl_workflow_runs``) and one per step
(``jl_workflow_steps``), the fold of each run's stream, kept inline with its events.

The rows are cut so that a step's end loads what its decision reads and nothing else: the
run's row holds the header (the request without its steps, the counts per step status, the
appends, the recovery) as a msgpack blob; each step's row holds its
:class:`~ledger.core.workflows.state.StepState` (its frozen request and resolution, output,
failure, reason) and its dependents. A run rebuilt from its row and some of its step rows is
a *partial* :class:`~ledger.core.workflows.state.RunState` (``complete`` false): a decision
that looks at a step not loaded raises, and the store loads it (ledger/store/workflows.py).

Every column follows from the state alone, whether the state was folded from nothing (a
rebuild, verify) or resumed from rows (the live path), so the two compare equal.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, cast
from uuid import UUID

import msgspec
from msgspec.structs import replace

from ledger.core.events import Event
from ledger.core.times import opt_us, to_us
from ledger.core.workflows.events import WORKFLOW_EVENTS
from ledger.core.workflows.spec import StepRequest
from ledger.core.workflows.state import RunState, StepState
from ledger.core.workflows.state import evolve as evolve_run
from ledger.core.workflows.status import StepStatus
from ledger.views.kind import StateKind
from ledger.views.view import Projection

_encoder = msgspec.msgpack.Encoder()
_header_decoder = msgspec.msgpack.Decoder(RunState)
_step_decoder = msgspec.msgpack.Decoder(StepState)
_dependents_decoder = msgspec.msgpack.Decoder(tuple[str, ...])
_counts_decoder = msgspec.msgpack.Decoder(dict[StepStatus, int])

WORKFLOW_EVENT_NAMES = tuple(cls.name for cls in WORKFLOW_EVENTS)

RUN_COLUMNS: tuple[str, ...] = (
    "run_id",
    "workflow_type",
    "org",
    "idempotency_key",
    "status",
    "result_step",
    "step_count",
    "submitted_steps",
    "counts",
    "recovered_from",
    "submitted_at",
    "updated_at",
    "finished_at",
    "version",
    "header",
)
STEP_COLUMNS: tuple[str, ...] = (
    "run_id",
    "step_key",
    "position",
    "kind",
    "stage",
    "status",
    "pending",
    "job_id",
    "code",
    "released_at",
    "finished_at",
    "dependents",
    "state",
)


def decode_header(blob: bytes) -> RunState:
    """A run's header: its state with no steps (``complete`` false)."""
    return _header_decoder.decode(blob)


def decode_step(blob: bytes) -> StepState:
    return _step_decoder.decode(blob)


def decode_dependents(blob: bytes) -> tuple[str, ...]:
    return _dependents_decoder.decode(blob)


def decode_counts(blob: bytes) -> dict[StepStatus, int]:
    return _counts_decoder.decode(blob)


RUNS = Projection(
    "workflow_runs",
    1,
    "jl_workflow_runs",
    ("run_id",),
    RUN_COLUMNS,
    "schema_workflow_runs",
    WORKFLOW_EVENT_NAMES,
    description="one row per workflow run: its header, status, counts per step status, result",
    blobs=(("header", decode_header),),
)
STEPS = Projection(
    "workflow_steps",
    1,
    "jl_workflow_steps",
    ("run_id", "step_key"),
    STEP_COLUMNS,
    "schema_workflow_steps",
    WORKFLOW_EVENT_NAMES,
    description="one row per workflow step: status, pending prerequisites, job, dependents",
    blobs=(("state", decode_step),),
)


def header_of(state: RunState) -> RunState:
    """``state`` without its steps: what the run's row keeps (the same however the state
    was built: folded from nothing or resumed from rows)."""
    return replace(
        state,
        request=replace(state.request, steps=()),
        steps={},
        dependents={},
        complete=False,
    )


def run_row(state: RunState, run_key: Any, submitted_steps: int | None = None) -> dict[str, Any]:
    """The run's row; ``run_key`` is the backend's spelling of the run id, and
    ``submitted_steps`` how many steps its submit gave (read from the request when the
    state is complete)."""
    if submitted_steps is None:
        assert state.complete, "a partial run's row needs its submitted step count"
        submitted_steps = len(state.request.steps)
    recovered = state.recovered
    return {
        "run_id": run_key,
        "workflow_type": state.request.workflow_type,
        "org": state.request.org,
        "idempotency_key": state.request.idempotency_key,
        "status": state.status.value,
        "result_step": state.request.result_step,
        "step_count": sum(state.counts.values()),
        "submitted_steps": submitted_steps,
        "counts": _encoder.encode(dict(sorted(state.counts.items()))),
        "recovered_from": None if recovered is None else recovered.source_run_id,
        "submitted_at": to_us(state.submitted_at),
        "updated_at": to_us(state.updated_at),
        "finished_at": opt_us(state.finished_at),
        "version": state.version,
        "header": _encoder.encode(header_of(state)),
    }


def step_row(
    run_key: Any, step: StepState, dependents: tuple[str, ...], job_key: Any
) -> dict[str, Any]:
    """A step's row; ``job_key`` is the backend's spelling of its job id (or ``None``)."""
    return {
        "run_id": run_key,
        "step_key": step.key,
        "position": step.position,
        "kind": step.kind.value,
        "stage": getattr(step.request, "stage", None),
        "status": step.status.value,
        "pending": step.pending,
        "job_id": job_key,
        "code": step.code,
        "released_at": opt_us(step.released_at),
        "finished_at": opt_us(step.finished_at),
        "dependents": _encoder.encode(dependents),
        "state": _encoder.encode(step),
    }


def resume(
    header: RunState,
    submitted_steps: int,
    rows: Iterable[tuple[StepState, tuple[str, ...]]],
    *,
    complete: bool,
) -> RunState:
    """A run from its row and step rows (in position order when ``complete``: then the
    request gets its submitted steps back, and the state is the whole run)."""
    steps: dict[str, StepState] = {}
    dependents: dict[str, tuple[str, ...]] = {}
    for step, its_dependents in rows:
        steps[step.key] = step
        dependents[step.key] = its_dependents
    request = header.request
    if complete:
        ordered: list[StepRequest] = [step.request for step in steps.values()]
        request = replace(request, steps=tuple(ordered[:submitted_steps]))
    return replace(header, request=request, steps=steps, dependents=dependents, complete=complete)


def add_steps(state: RunState, rows: Mapping[str, tuple[StepState, tuple[str, ...]]]) -> RunState:
    """``state`` with more loaded steps (the ones it holds, maybe changed since, win)."""
    steps = {key: step for key, (step, _) in rows.items() if key not in state.steps}
    dependents = {key: deps for key, (_, deps) in rows.items() if key not in state.steps}
    return replace(
        state,
        steps={**state.steps, **steps},
        dependents={**state.dependents, **dependents},
    )


KIND: StateKind[UUID, RunState] = StateKind(
    "runs",
    WORKFLOW_EVENTS,
    cast("Callable[[RunState | None, Event], RunState]", evolve_run),
    lambda run_id: run_id,  # a run's stream id is its id
    RUNS,
    fold="run",
)
"""Workflow runs, by id: folded by the run hooks (the run's row and its changed steps' rows).
Folded before jobs: a released step's ``workflow_step_released`` precedes its job's
``job_enqueued``."""
