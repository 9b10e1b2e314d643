"""The workflow commands' transactions (:meth:`WorkflowCommands.submit
<ledger.workflows.workflow_commands.WorkflowCommands.submit>` and the others): each is one unit
of work that decides with :mod:`ledger.core.workflows.decide` and appends the run's events and
the job changes they cause (a released step's ``job_enqueued``, a cancelled run's
``job_cancelled``) together.

Locks, as every writer takes them: a job's row before a run's release lock, runs in run-id
order. A cancel therefore locks the run's live jobs (found by an unlocked read) before the
run, then any job released in between. ``complete`` and ``append`` only *try* the release
lock and fail fast with ``workflow.release_conflict``; a job's end (the workflow policy)
and a cancel wait for it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple
from uuid import UUID

import msgspec

from ledger.clock import Clock
from ledger.core import decide
from ledger.core.events import JobEvent
from ledger.core.values import JSON
from ledger.core.workflows.decide import (
    check_recovery_repeat,
    check_repeat,
    decide_append,
    decide_cancel,
    decide_complete_external,
    decide_recover,
    decide_submit,
)
from ledger.core.workflows.errors import InvalidWorkflowSpecError, WorkflowNotFoundError
from ledger.core.workflows.ids import recovery_run_id
from ledger.core.workflows.release import Decision
from ledger.core.workflows.spec import ExternalStep, JobStep, StepRequest, WorkflowRequest
from ledger.core.workflows.state import RunState, StepsNotLoadedError
from ledger.store.store import Store
from ledger.store.unit_of_work import UnitOfWork
from ledger.views.kinds import DEFINITIONS, JOBS, RUNS


class WorkflowStarted(NamedTuple):
    """A started run's id; ``created`` false when an idempotent repeat found it."""

    run_id: UUID
    created: bool


def request_of(request: WorkflowRequest | Mapping[str, Any]) -> WorkflowRequest:
    """A request given as a struct or as its JSON shape (each step with its ``kind``)."""
    if isinstance(request, WorkflowRequest):
        return request
    try:
        return msgspec.convert(request, WorkflowRequest)
    except msgspec.ValidationError as exc:
        raise InvalidWorkflowSpecError(f"workflow request: {exc}") from None


def steps_of(steps: Sequence[StepRequest | Mapping[str, Any]]) -> tuple[StepRequest, ...]:
    """Steps given as structs or as their JSON shapes (each with its ``kind``)."""
    try:
        return tuple(
            step if isinstance(step, JobStep | ExternalStep) else msgspec.convert(step, StepRequest)
            for step in steps
        )
    except msgspec.ValidationError as exc:
        raise InvalidWorkflowSpecError(f"steps: {exc}") from None


def start(
    store: Store, clock: Clock, request: WorkflowRequest, new_id: Callable[[], UUID]
) -> WorkflowStarted:
    """Submit a run, releasing its root steps in the same commit; an idempotency key that
    names a run returns it if the request is the same (canonically), else conflicts."""
    with store.unit_of_work() as uow:
        key = request.idempotency_key
        if key is not None:
            uow.serialise_appends()  # the key's answer must hold until commit
            existing = uow.find_workflow_run(request.workflow_type, request.org, key)
            if existing is not None:
                state = _run(uow, existing, whole=True)
                check_repeat(state, request)
                return WorkflowStarted(existing, False)
        job_types = sorted({step.job_type for step in request.steps if isinstance(step, JobStep)})
        definitions = {t: d.definition for t, d in uow.states(DEFINITIONS, job_types).items()}
        run_id = new_id()
        decision = decide_submit(run_id, request, definitions, clock.now())
        _append(uow, run_id, decision)
    return WorkflowStarted(run_id, True)


def complete_step(
    store: Store,
    clock: Clock,
    run_id: UUID,
    step_key: str,
    *,
    succeeded: bool,
    output: JSON | None,
    reason: str,
) -> RunState:
    """Complete a waiting external step (fails fast if the run's release lock is held)."""
    with store.unit_of_work() as uow:
        state = _run(uow, run_id, keys=(step_key,), fail_fast=True)
        now = clock.now()
        decision = _decided(
            uow,
            state,
            lambda s: decide_complete_external(
                s, step_key, succeeded, now, output=output, reason=reason
            ),
        )
        _append(uow, run_id, decision)
    return decision.state


def cancel(store: Store, clock: Clock, run_id: UUID, reason: str) -> RunState:
    """Cancel a live run: its live steps, and their jobs (whose workers' later writes are
    then fenced out). Cancelling a cancelled run changes nothing."""
    with store.unit_of_work() as uow:
        jobs = uow.lock_jobs(uow.live_step_jobs(run_id))  # jobs' rows before the run's lock
        state = _run(uow, run_id, whole=True)
        now = clock.now()
        decision = decide_cancel(state, reason, now)
        late = [job_id for job_id in decision.cancel_jobs if job_id not in jobs]
        jobs.update(uow.lock_jobs(late))  # released since the unlocked read
        cancels: list[tuple[UUID, Sequence[JobEvent]]] = [
            (job_id, [decide.decide_cancel(jobs[job_id], now, reason)])
            for job_id in decision.cancel_jobs
            if job_id in jobs and jobs[job_id].status.is_live
        ]
        _append(uow, run_id, decision, cancels)
    return decision.state


def append_steps(
    store: Store,
    clock: Clock,
    run_id: UUID,
    steps: Sequence[StepRequest],
    mutation_key: str,
) -> RunState:
    """Add steps to a live run, idempotently per ``mutation_key`` (fails fast if the run's
    release lock is held)."""
    with store.unit_of_work() as uow:
        state = _run(uow, run_id, whole=True, fail_fast=True)
        job_types = sorted({step.job_type for step in steps if isinstance(step, JobStep)})
        definitions = {t: d.definition for t, d in uow.states(DEFINITIONS, job_types).items()}
        decision = decide_append(state, mutation_key, steps, definitions, clock.now())
        _append(uow, run_id, decision)
    return decision.state


def recover(
    store: Store,
    clock: Clock,
    run_id: UUID,
    *,
    from_step: str,
    reason: str,
    request_key: str,
) -> WorkflowStarted:
    """A new run of a finished run's steps that re-runs ``from_step`` and what follows it
    and reuses the others' outputs; the same ``request_key`` again returns that run."""
    new_run = recovery_run_id(run_id, request_key)
    with store.unit_of_work() as uow:
        existing = uow.lock_runs({new_run: ()}, whole=True).get(new_run)
        if existing is not None:
            check_recovery_repeat(existing, run_id, from_step, reason)
            return WorkflowStarted(new_run, False)
        source = _run(uow, run_id, whole=True)
        decision = decide_recover(
            new_run,
            source,
            from_step=from_step,
            reason=reason,
            request_key=request_key,
            now=clock.now(),
        )
        _append(uow, new_run, decision)
    return WorkflowStarted(new_run, True)


# --- helpers ---------------------------------------------------------------------------------


def _run(
    uow: UnitOfWork,
    run_id: UUID,
    *,
    keys: Sequence[str] = (),
    whole: bool = False,
    fail_fast: bool = False,
) -> RunState:
    state = uow.lock_runs({run_id: keys}, whole=whole, fail_fast=fail_fast).get(run_id)
    if state is None:
        raise WorkflowNotFoundError(f"no workflow run {run_id}")
    return state


def _decided(
    uow: UnitOfWork, state: RunState, decision: Callable[[RunState], Decision]
) -> Decision:
    """``decision`` on ``state``, loading the steps it asks for while it asks (pure, so
    asking again on more of the run is safe). A step asked for again was not in the run's
    rows: the run is then loaded whole, so that the decision sees it has no such step."""
    asked: set[str] = set()
    while True:
        try:
            return decision(state)
        except StepsNotLoadedError as missing:
            whole = missing.whole or not asked.isdisjoint(missing.keys)
            asked.update(missing.keys)
            state = uow.more_steps(state.run_id, missing.keys, whole=whole)


def _append(
    uow: UnitOfWork,
    run_id: UUID,
    decision: Decision,
    job_changes: Sequence[tuple[UUID, Sequence[JobEvent]]] = (),
) -> None:
    if not decision.events and not job_changes:
        return
    enqueued: list[tuple[UUID, Sequence[JobEvent]]] = [
        (job.job_id, [job.enqueued]) for job in decision.enqueue
    ]
    uow.append([RUNS.change(run_id, decision.events), JOBS.changes([*job_changes, *enqueued])])
