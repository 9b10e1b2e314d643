"""The stable codes of workflow refusals (``workflow.*``), in the style of
:mod:`ledger.core.errors`: scripts match on the code, people read the message."""

from __future__ import annotations

from ledger.core.errors import LedgerError

DEPENDENCY_UNSATISFIED = "workflow.dependency_unsatisfied"
"""The code a step is cancelled with when an ``on_success`` prerequisite did not succeed."""

RUN_CANCELLED = "workflow.run_cancelled"
"""The code a step is cancelled with when its run is cancelled."""

JOB_CANCELLED = "workflow.job_cancelled"
"""The code a step is cancelled with when its job was cancelled (by an operator)."""


class InvalidWorkflowSpecError(LedgerError):
    """A run request (or an append) that no run could follow: blank names, duplicate or
    unknown steps, bad dependencies, no steps, non-positive attempts or timeouts."""

    code = "workflow.invalid_spec"


class DependencyCycleError(InvalidWorkflowSpecError):
    """The dependencies form a cycle; the message names it (``a -> b -> a``)."""

    code = "workflow.dependency_cycle"

    def __init__(self, cycle: list[str]) -> None:
        super().__init__("dependencies form a cycle: " + " -> ".join(cycle))
        self.cycle = cycle


class WorkflowDefinitionNotFoundError(LedgerError):
    """A job step of a job type that is not defined, or is disabled."""

    code = "workflow.definition_not_found_or_disabled"


class WorkflowIdempotencyConflictError(LedgerError):
    """An idempotency key (or a recovery's request key) reused with a different request."""

    code = "workflow.idempotency_conflict"


class AppendConflictError(LedgerError):
    """A mutation key reused with other steps than the append it first named."""

    code = "workflow.append_conflicting_retry"


class StepNotFoundError(LedgerError):
    """The run has no step with this key."""

    code = "workflow.step_not_found"


class StepNotExternalError(LedgerError):
    """An external completion of a job step (a job step ends through its job)."""

    code = "workflow.step_not_external"


class CompletionConflictError(LedgerError):
    """An external step completed again, differently from its first completion."""

    code = "workflow.completion_conflict"


class WorkflowTransitionError(LedgerError):
    """A command the run's or the step's status does not allow (complete a blocked step,
    append to a finished run, cancel a succeeded one)."""

    code = "workflow.invalid_transition"


class ReleaseConflictError(LedgerError):
    """The run's release lock is held by another writer (raised by the store)."""

    code = "workflow.release_conflict"


class WorkflowNotFoundError(LedgerError):
    """No run with this id."""

    code = "workflow.not_found"
