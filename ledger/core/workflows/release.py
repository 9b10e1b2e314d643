"""Releasing and resolving steps: what a step's end does to its dependents, transitively,
and the run status that follows. The commands of :mod:`ledger.core.workflows.decide` all end
here.

A :class:`RunChange` folds each event as it is decided, so every later decision of the same
command sees the state after the ones before (a fan-in step released by the second of two
prerequisites that end in one command is released once, by the second).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from datetime import datetime
from typing import NamedTuple
from uuid import UUID

from ledger.core.events import JobEnqueued
from ledger.core.workflows.errors import DEPENDENCY_UNSATISFIED
from ledger.core.workflows.events import (
    WorkflowEvent,
    WorkflowStatusChanged,
    WorkflowStepCancelled,
    WorkflowStepReleased,
    WorkflowSubmitted,
)
from ledger.core.workflows.ids import step_job_id
from ledger.core.workflows.jobs import step_enqueued
from ledger.core.workflows.spec import JobStep, ReleaseMode
from ledger.core.workflows.state import Readiness, RunState, evolve, expected_result, readiness
from ledger.core.workflows.status import RunStatus, StepStatus, rollup


class StepJob(NamedTuple):
    """A job to enqueue in the same commit: a released job step's."""

    step_key: str
    job_id: UUID
    enqueued: JobEnqueued


class Decision(NamedTuple):
    """What a workflow command decided: the run's new events (``state`` is the run after
    them), the jobs to enqueue, and the live jobs to cancel (``job_cancelled``: their
    workers' later writes are fenced out)."""

    events: list[WorkflowEvent]
    enqueue: list[StepJob]
    cancel_jobs: list[UUID]
    state: RunState


class RunChange:
    """The events of one command, folded as they are decided."""

    def __init__(self, state: RunState, now: datetime) -> None:
        self.state = state
        self.now = now
        self.events: list[WorkflowEvent] = []
        self.enqueue: list[StepJob] = []
        self.cancel_jobs: list[UUID] = []

    @classmethod
    def submit(cls, submitted: WorkflowSubmitted) -> RunChange:
        """The change that starts a run with ``submitted``."""
        change = cls(evolve(None, submitted), submitted.at)
        change.events.append(submitted)
        return change

    def emit(self, event: WorkflowEvent) -> None:
        self.state = evolve(self.state, event)
        self.events.append(event)

    def decision(self) -> Decision:
        return Decision(self.events, self.enqueue, self.cancel_jobs, self.state)

    # --- releasing ----------------------------------------------------------------------

    def release(self, key: str) -> None:
        """Release a ready step: its job (a job step) or its wait (an external step)."""
        step = self.state.need(key)
        job_id: UUID | None = None
        if isinstance(step.request, JobStep) and step.resolution is not None:
            job_id = step_job_id(self.state.run_id, key)
            enqueued = step_enqueued(
                self.state.run_id,
                job_id,
                step.request,
                resolution=step.resolution,
                org=self.state.request.org,
                now=self.now,
            )
            self.enqueue.append(StepJob(key, job_id, enqueued))
        self.emit(WorkflowStepReleased(at=self.now, step_key=key, job_id=job_id))

    def settle(self, keys: Iterable[str]) -> None:
        """Release, or cancel as unsatisfied, every blocked step among ``keys`` whose
        prerequisites have all ended, and carry each such cancel on to its dependents."""
        todo = deque(keys)
        while todo:
            key = todo.popleft()
            step = self.state.need(key)
            if step.status is not StepStatus.BLOCKED:
                continue
            ready = readiness(self.state, key)
            if ready == Readiness.READY:
                self.release(key)
            elif ready == Readiness.UNSATISFIED:
                self.emit(
                    WorkflowStepCancelled(
                        at=self.now,
                        step_key=key,
                        job_id=None,
                        code=DEPENDENCY_UNSATISFIED,
                        reason=self._unsatisfied_by(key),
                    )
                )
                todo.extend(self.state.dependents[key])

    def ended(self, key: str) -> None:
        """Step ``key`` has just ended: resolve its dependents, then the run's status."""
        if self.state.status is not RunStatus.CANCELLED:
            self.settle(self.state.dependents[key])
        self.roll_up()

    def roll_up(self) -> None:
        """Record the run's status if its steps now say another (a cancelled run stays so)."""
        if self.state.status is RunStatus.CANCELLED:
            return
        status = rollup(self.state.counts)
        if status is not self.state.status:
            result = expected_result(self.state) if status is RunStatus.SUCCEEDED else None
            self.emit(WorkflowStatusChanged(at=self.now, status=status, result=result))

    def _unsatisfied_by(self, key: str) -> str:
        depends_on = self.state.need(key).request.depends_on
        prerequisites = self.state.need_all(dependency.step for dependency in depends_on)
        failed = [
            f"{dependency.step} {prerequisite.status}"
            for dependency, prerequisite in zip(depends_on, prerequisites, strict=True)
            if prerequisite.status is not StepStatus.SUCCEEDED
            and dependency.mode is ReleaseMode.ON_SUCCESS
        ]
        return "prerequisite " + ", ".join(failed)
