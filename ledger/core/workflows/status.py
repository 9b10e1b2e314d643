"""Step and run statuses, and the run's roll-up of its steps' (SEMANTICS.md, Workflows)."""

from __future__ import annotations

from collections.abc import Iterable
from enum import StrEnum


class StepStatus(StrEnum):
    """Where a step is. Terminal: succeeded, failed, cancelled."""

    BLOCKED = "blocked"
    ENQUEUED = "enqueued"
    RUNNING = "running"
    WAITING_FOR_EXTERNAL = "waiting_for_external"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"

    @property
    def is_terminal(self) -> bool:
        return self in (StepStatus.SUCCEEDED, StepStatus.FAILED, StepStatus.CANCELLED)


class RunStatus(StrEnum):
    """Where a run is. Finished: succeeded, completed_with_errors, cancelled."""

    RUNNING = "running"
    WAITING_FOR_EXTERNAL = "waiting_for_external"
    SUCCEEDED = "succeeded"
    COMPLETED_WITH_ERRORS = "completed_with_errors"
    CANCELLED = "cancelled"

    @property
    def is_finished(self) -> bool:
        return self in (
            RunStatus.SUCCEEDED,
            RunStatus.COMPLETED_WITH_ERRORS,
            RunStatus.CANCELLED,
        )


_ACTIVE = frozenset((StepStatus.BLOCKED, StepStatus.ENQUEUED, StepStatus.RUNNING))


def rollup(statuses: Iterable[StepStatus]) -> RunStatus:
    """A (not cancelled) run's status from its steps': any blocked, enqueued or running ->
    running; else any waiting_for_external -> waiting_for_external; else any failed or
    cancelled -> completed_with_errors; else succeeded."""
    waiting = errors = False
    for status in statuses:
        if status in _ACTIVE:
            return RunStatus.RUNNING
        if status is StepStatus.WAITING_FOR_EXTERNAL:
            waiting = True
        elif status is not StepStatus.SUCCEEDED:
            errors = True
    if waiting:
        return RunStatus.WAITING_FOR_EXTERNAL
    return RunStatus.COMPLETED_WITH_ERRORS if errors else RunStatus.SUCCEEDED
