"""Step and run statuses, and the run's roll-up of its steps' (SEMANTICS.md, Workflows)."""

from __future__ import annotations

from collections.abc import Mapping
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


_ACTIVE = (StepStatus.BLOCKED, StepStatus.ENQUEUED, StepStatus.RUNNING)
_ERRORS = (StepStatus.FAILED, StepStatus.CANCELLED)


def rollup(counts: Mapping[StepStatus, int]) -> RunStatus:
    """A (not cancelled) run's status from how many of its steps are in each status: any
    blocked, enqueued or running -> running; else any waiting_for_external ->
    waiting_for_external; else any failed or cancelled -> completed_with_errors; else
    succeeded. Counts, not steps, so a 1,000-step run rolls up in constant time."""
    if any(counts.get(status, 0) for status in _ACTIVE):
        return RunStatus.RUNNING
    if counts.get(StepStatus.WAITING_FOR_EXTERNAL, 0):
        return RunStatus.WAITING_FOR_EXTERNAL
    if any(counts.get(status, 0) for status in _ERRORS):
        return RunStatus.COMPLETED_WITH_ERRORS
    return RunStatus.SUCCEEDED
