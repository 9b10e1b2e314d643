"""A run's state is ``fold(events)`` of its own stream, built by the pure :func:`evolve`,
which refuses an event that cannot follow (as :func:`ledger.core.state.evolve` does for jobs).

The fold checks more than statuses: a release needs every prerequisite ended and satisfied,
a cancel as unsatisfied needs a prerequisite that let the step down, and a recorded status
must be the roll-up of the steps. So a history the decisions did not write is refused when
it is read, and ``projections verify`` compares views against a fold that means something.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from uuid import UUID

import msgspec
from msgspec.structs import replace

from ledger.core.errors import LedgerError
from ledger.core.state import IllegalTransitionError
from ledger.core.values import JSON, Failure
from ledger.core.workflows.errors import DEPENDENCY_UNSATISFIED, RUN_CANCELLED
from ledger.core.workflows.events import (
    WorkflowCancelled,
    WorkflowEvent,
    WorkflowExternalStepCompleted,
    WorkflowRecovered,
    WorkflowStatusChanged,
    WorkflowStepCancelled,
    WorkflowStepFailed,
    WorkflowStepReleased,
    WorkflowStepsAppended,
    WorkflowStepSucceeded,
    WorkflowSubmitted,
)
from ledger.core.workflows.spec import (
    JobStep,
    ReleaseMode,
    StepKind,
    StepRequest,
    StepResolution,
    WorkflowRequest,
    kind_of,
)
from ledger.core.workflows.status import RunStatus, StepStatus, rollup


class StepState(msgspec.Struct, frozen=True, kw_only=True):
    """One step as the run's history says it is."""

    request: StepRequest
    resolution: StepResolution | None
    """A job step's frozen settings; ``None`` for an external step."""
    status: StepStatus = StepStatus.BLOCKED
    pending: int = 0
    """How many prerequisites have not ended (derived: counted down as they end, so a
    fan-in step is looked at once, when its last prerequisite ends)."""
    position: int = 0
    """Where the step stands in the run (submit order, then appends'): the order the
    decisions walk the steps in, kept so a store can load them back in it."""
    job_id: UUID | None = None
    output: JSON | None = None
    failure: Failure | None = None
    code: str | None = None
    """Why a cancelled step was cancelled (``workflow.dependency_unsatisfied``, …)."""
    reason: str | None = None
    reused_from: UUID | None = None
    """The run whose output a recovery reused for this step."""
    released_at: datetime | None = None
    finished_at: datetime | None = None

    @property
    def key(self) -> str:
        return self.request.key

    @property
    def kind(self) -> StepKind:
        return kind_of(self.request)


class StepsNotLoadedError(LedgerError):
    """A decision or a fold on a partly loaded run (:attr:`RunState.complete` false) needs
    steps the store did not load: it loads them (``keys``; ``whole``: every step) and
    decides again. Decisions are pure, so deciding again on more of the run is safe."""

    code = "workflow.steps_not_loaded"

    def __init__(self, run_id: UUID, keys: Iterable[str] = (), *, whole: bool = False) -> None:
        self.run_id = run_id
        self.keys = tuple(keys)
        self.whole = whole
        wanted = "every step" if whole else ", ".join(self.keys)
        super().__init__(f"run {run_id} was loaded in part; the decision needs {wanted}")


class RunState(msgspec.Struct, frozen=True, kw_only=True):
    """A workflow run after ``version`` events. ``steps`` keep the order they were given in
    (submit, then appends); ``dependents`` is derived from them and kept for the releases.

    A store may load a run in part (``complete`` false): the header and counts, and only
    the steps a decision will look at (``steps`` and ``dependents`` then hold those). A
    lookup of any other step raises :class:`StepsNotLoadedError`, so a partial load can
    be wrong only by being slower, never by deciding on a step it did not see."""

    run_id: UUID
    request: WorkflowRequest
    steps: dict[str, StepState]
    dependents: dict[str, tuple[str, ...]]
    counts: dict[StepStatus, int]
    """How many steps are in each status (derived; the roll-up reads it)."""
    submitted_at: datetime
    updated_at: datetime
    version: int
    status: RunStatus = RunStatus.RUNNING
    result: JSON | None = None
    reason: str | None = None
    finished_at: datetime | None = None
    appends: dict[str, tuple[StepRequest, ...]] = {}
    """Each mutation key's appended steps, to tell a repeat from a conflict."""
    recovered: WorkflowRecovered | None = None
    complete: bool = True
    """Every step is in ``steps`` (a fold from nothing); false: a partial load."""

    def step(self, key: str) -> StepState | None:
        """Step ``key``, ``None`` if the run has none; raises StepsNotLoadedError if the
        run was loaded in part without it."""
        step = self.steps.get(key)
        if step is None and not self.complete:
            raise StepsNotLoadedError(self.run_id, (key,))
        return step

    def need(self, key: str) -> StepState:
        """Step ``key``, which the run is known to have (a dependent, a prerequisite)."""
        step = self.step(key)
        if step is None:
            raise IllegalTransitionError(f"run {self.run_id} has no step {key!r}")
        return step

    def need_all(self, keys: Iterable[str]) -> list[StepState]:
        """Steps ``keys``; a partial load lacking some raises for all of them at once."""
        keys = list(keys)
        missing = [key for key in keys if key not in self.steps]
        if missing and not self.complete:
            raise StepsNotLoadedError(self.run_id, missing)
        return [self.need(key) for key in keys]

    def require_complete(self) -> None:
        """Refuse a partial load: the decision walks every step."""
        if not self.complete:
            raise StepsNotLoadedError(self.run_id, whole=True)


class Readiness:
    """What a blocked step's prerequisites say: wait, run, or never run."""

    PENDING = "pending"
    READY = "ready"
    UNSATISFIED = "unsatisfied"


def readiness(state: RunState, key: str) -> str:
    """``PENDING`` while a prerequisite has not ended; else ``UNSATISFIED`` if an
    ``on_success`` prerequisite did not succeed; else ``READY``."""
    step = state.need(key)
    if step.pending:
        return Readiness.PENDING
    prerequisites = state.need_all(dependency.step for dependency in step.request.depends_on)
    for dependency, prerequisite in zip(step.request.depends_on, prerequisites, strict=True):
        status = prerequisite.status
        if dependency.mode is ReleaseMode.ON_SUCCESS and status is not StepStatus.SUCCEEDED:
            return Readiness.UNSATISFIED
    return Readiness.READY


def expected_result(state: RunState) -> JSON | None:
    """The run's result once it succeeded: its result step's output (``None`` if none)."""
    key = state.request.result_step
    return state.need(key).output if key is not None else None


def _add_steps(
    steps: dict[str, StepState],
    dependents: dict[str, tuple[str, ...]],
    counts: dict[StepStatus, int],
    new: Iterable[StepRequest],
    resolutions: Iterable[StepResolution],
) -> None:
    by_key = {resolution.key: resolution for resolution in resolutions}
    for step in new:
        if step.key in steps:
            raise IllegalTransitionError(f"step {step.key!r} added twice")
        resolution = by_key.pop(step.key, None)
        if (resolution is None) == isinstance(step, JobStep):
            raise IllegalTransitionError(f"step {step.key!r}: a resolution iff a job step")
        pending = 0
        for dependency in step.depends_on:
            prerequisite = steps.get(dependency.step)
            if prerequisite is None:
                raise IllegalTransitionError(f"step {step.key!r} depends on unknown step")
            pending += not prerequisite.status.is_terminal
            dependents[dependency.step] += (step.key,)
        steps[step.key] = StepState(
            request=step, resolution=resolution, pending=pending, position=len(steps)
        )
        dependents[step.key] = ()
        counts[StepStatus.BLOCKED] = counts.get(StepStatus.BLOCKED, 0) + 1
    if by_key:
        raise IllegalTransitionError(f"resolutions of no step: {sorted(by_key)}")


def _submitted(event: WorkflowSubmitted) -> RunState:
    steps: dict[str, StepState] = {}
    dependents: dict[str, tuple[str, ...]] = {}
    counts: dict[StepStatus, int] = {}
    _add_steps(steps, dependents, counts, event.request.steps, event.resolutions)
    return RunState(
        run_id=event.run_id,
        request=event.request,
        steps=steps,
        dependents=dependents,
        counts=counts,
        submitted_at=event.at,
        updated_at=event.at,
        version=1,
    )


def _step(state: RunState, event: WorkflowEvent, key: str, *allowed: StepStatus) -> StepState:
    step = state.step(key)
    if step is None:
        raise IllegalTransitionError(f"{event.name} of unknown step {key!r}")
    if step.status not in allowed:
        raise IllegalTransitionError(f"{event.name} of step {key!r}, which is {step.status}")
    return step


def _job(step: StepState, event: WorkflowEvent, job_id: UUID) -> None:
    if step.job_id != job_id:
        raise IllegalTransitionError(f"{event.name} of step {step.key!r} names another job")


def _set(
    state: RunState,
    steps: dict[str, StepState],
    counts: dict[StepStatus, int],
    step: StepState,
    **changes: object,
) -> None:
    """Replace ``step`` in ``steps`` (copies of ``state``'s, owned by the caller), keeping
    the derived counts: statuses, and each dependent's pending prerequisites once ``step``
    ends (so a partial load must hold the dependents of a step that ends)."""
    new = replace(step, **changes)
    if new.status is not step.status and new.status.is_terminal and not step.status.is_terminal:
        keys = state.dependents[new.key]
        missing = [key for key in keys if key not in steps]
        if missing and not state.complete:
            raise StepsNotLoadedError(state.run_id, missing)
        for key in keys:
            dependent = steps[key]
            steps[key] = replace(dependent, pending=dependent.pending - 1)
    steps[new.key] = new
    if new.status is step.status:
        return
    counts[step.status] -= 1
    counts[new.status] = counts.get(new.status, 0) + 1


def _with(state: RunState, step: StepState, at: datetime, **changes: object) -> RunState:
    steps, counts = dict(state.steps), dict(state.counts)
    _set(state, steps, counts, step, **changes)
    return replace(state, steps=steps, counts=counts, updated_at=at, version=state.version + 1)


def evolve(state: RunState | None, event: WorkflowEvent) -> RunState:
    """Apply one event to a run's state. Pure; raises IllegalTransitionError."""
    if isinstance(event, WorkflowSubmitted):
        if state is not None:
            raise IllegalTransitionError(f"run {state.run_id} submitted twice")
        return _submitted(event)
    if state is None:
        raise IllegalTransitionError(f"{event.name} before workflow_submitted")
    at = event.at
    if isinstance(event, WorkflowStatusChanged):
        return _status_changed(state, event)
    if isinstance(event, WorkflowCancelled):
        if state.status.is_finished:
            raise IllegalTransitionError(f"cancel of run {state.run_id}, {state.status}")
        return replace(
            state,
            status=RunStatus.CANCELLED,
            reason=event.reason,
            finished_at=at,
            updated_at=at,
            version=state.version + 1,
        )
    if isinstance(event, WorkflowRecovered):
        return _recovered(state, event)
    if isinstance(event, WorkflowStepsAppended):
        state.require_complete()
        if state.status.is_finished or event.mutation_key in state.appends:
            raise IllegalTransitionError(f"append to run {state.run_id}, {state.status}")
        steps, dependents = dict(state.steps), dict(state.dependents)
        counts = dict(state.counts)
        _add_steps(steps, dependents, counts, event.steps, event.resolutions)
        appends = {**state.appends, event.mutation_key: event.steps}
        return replace(
            state,
            steps=steps,
            dependents=dependents,
            counts=counts,
            appends=appends,
            updated_at=at,
            version=state.version + 1,
        )
    if isinstance(event, WorkflowStepReleased):
        step = _step(state, event, event.step_key, StepStatus.BLOCKED)
        if state.status is RunStatus.CANCELLED:
            raise IllegalTransitionError(f"release in cancelled run {state.run_id}")
        if readiness(state, step.key) != Readiness.READY:
            raise IllegalTransitionError(f"release of step {step.key!r} before it is ready")
        if (event.job_id is None) != (step.kind is StepKind.EXTERNAL):
            raise IllegalTransitionError(f"release of step {step.key!r}: a job iff a job step")
        status = StepStatus.WAITING_FOR_EXTERNAL if event.job_id is None else StepStatus.ENQUEUED
        return _with(state, step, at, status=status, job_id=event.job_id, released_at=at)
    if isinstance(event, WorkflowStepSucceeded):
        step = _step(state, event, event.step_key, StepStatus.ENQUEUED)
        _job(step, event, event.job_id)
        return _with(
            state, step, at, status=StepStatus.SUCCEEDED, output=event.output, finished_at=at
        )
    if isinstance(event, WorkflowStepFailed):
        step = _step(state, event, event.step_key, StepStatus.ENQUEUED)
        _job(step, event, event.job_id)
        return _with(
            state, step, at, status=StepStatus.FAILED, failure=event.failure, finished_at=at
        )
    if isinstance(event, WorkflowExternalStepCompleted):
        step = _step(state, event, event.step_key, StepStatus.WAITING_FOR_EXTERNAL)
        if event.output is not None and not event.succeeded:
            raise IllegalTransitionError(f"failed completion of {step.key!r} with an output")
        status = StepStatus.SUCCEEDED if event.succeeded else StepStatus.FAILED
        return _with(
            state, step, at, status=status, output=event.output, reason=event.reason, finished_at=at
        )
    if isinstance(event, WorkflowStepCancelled):
        return _step_cancelled(state, event)
    raise IllegalTransitionError(f"not a workflow event: {type(event).__name__}")


def _step_cancelled(state: RunState, event: WorkflowStepCancelled) -> RunState:
    live = (StepStatus.BLOCKED, StepStatus.ENQUEUED, StepStatus.WAITING_FOR_EXTERNAL)
    step = _step(state, event, event.step_key, *live)
    if step.job_id != event.job_id:
        raise IllegalTransitionError(f"{event.name} of step {step.key!r} names another job")
    if event.code == DEPENDENCY_UNSATISFIED and (
        step.status is not StepStatus.BLOCKED or readiness(state, step.key) != Readiness.UNSATISFIED
    ):
        raise IllegalTransitionError(f"step {step.key!r} cancelled as unsatisfied, but is not")
    if event.code == RUN_CANCELLED and state.status is not RunStatus.CANCELLED:
        raise IllegalTransitionError(f"step {step.key!r} cancelled with its run, which is not")
    return _with(
        state,
        step,
        event.at,
        status=StepStatus.CANCELLED,
        code=event.code,
        reason=event.reason,
        finished_at=event.at,
    )


def _recovered(state: RunState, event: WorkflowRecovered) -> RunState:
    if state.version != 1:
        raise IllegalTransitionError(
            f"workflow_recovered not right after run {state.run_id}'s submit"
        )
    state.require_complete()
    steps, counts = dict(state.steps), dict(state.counts)
    for reused in event.reused:
        step = steps.get(reused.key)
        if step is None or reused.key == event.from_step or step.status.is_terminal:
            raise IllegalTransitionError(f"recovery reuses step {reused.key!r}")
        _set(
            state,
            steps,
            counts,
            step,
            status=StepStatus.SUCCEEDED,
            output=reused.output,
            reused_from=event.source_run_id,
            finished_at=event.at,
        )
    return replace(
        state, steps=steps, counts=counts, recovered=event, updated_at=event.at, version=2
    )


def _status_changed(state: RunState, event: WorkflowStatusChanged) -> RunState:
    if state.status is RunStatus.CANCELLED:
        raise IllegalTransitionError(f"status change of cancelled run {state.run_id}")
    status = rollup(state.counts)
    if event.status is not status or status is state.status:
        raise IllegalTransitionError(
            f"run {state.run_id} recorded {event.status} from {state.status}; "
            f"its steps say {status}"
        )
    result = expected_result(state) if status is RunStatus.SUCCEEDED else None
    if event.result != result:
        raise IllegalTransitionError(f"run {state.run_id}'s result is not its result step's output")
    return replace(
        state,
        status=status,
        result=result,
        finished_at=event.at if status.is_finished else None,
        updated_at=event.at,
        version=state.version + 1,
    )


def fold(events: Iterable[WorkflowEvent], state: RunState | None = None) -> RunState | None:
    """Apply ``events`` in order, starting from ``state`` (``None``: from nothing)."""
    for event in events:
        state = evolve(state, event)
    return state
