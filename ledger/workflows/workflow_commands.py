"""The workflow commands: :class:`WorkflowCommands`, what ``ledger.workflows`` hands out.

The reads of :class:`~ledger.workflows.workflow_reader.WorkflowReader` plus submit, complete
a step, cancel, append steps and recover; each command is one unit of work
(:mod:`ledger.workflows.workflow_writes`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any
from uuid import UUID

from ledger.core.values import JSON
from ledger.core.workflows.spec import StepRequest, WorkflowRequest
from ledger.core.workflows.state import RunState
from ledger.jobs.binding import LedgerBinding
from ledger.workflows import workflow_writes as workflows
from ledger.workflows.workflow_reader import WorkflowReader
from ledger.workflows.workflow_writes import WorkflowStarted


class WorkflowCommands(WorkflowReader):
    """The workflow reads and commands of one ledger."""

    def __init__(self, bound: LedgerBinding) -> None:
        super().__init__(bound.store, bound.clock)
        self._new_id = bound.new_id

    def submit(self, request: WorkflowRequest | Mapping[str, Any]) -> WorkflowStarted:
        """Submit a workflow run (a :class:`WorkflowRequest` or its JSON shape), releasing its
        root steps' jobs in the same commit. With an idempotency key, the same request again
        returns the same run (``created`` false); another is ``workflow.idempotency_conflict``."""
        return workflows.start(self.store, self.clock, workflows.request_of(request), self._new_id)

    def complete_step(
        self,
        run_id: UUID,
        step_key: str,
        succeeded: bool,
        output: JSON | None = None,
        reason: str = "",
    ) -> RunState:
        """Complete a waiting external step (an approval gate). The identical completion
        again changes nothing; another is ``workflow.completion_conflict``; a job step is
        ``workflow.step_not_external``; a run being released by another writer is
        ``workflow.release_conflict`` (retry)."""
        return workflows.complete_step(
            self.store,
            self.clock,
            run_id,
            step_key,
            succeeded=succeeded,
            output=output,
            reason=reason,
        )

    def cancel(self, run_id: UUID, reason: str = "cancelled by operator") -> RunState:
        """Cancel a live run: its live steps and their jobs (whose workers' later writes are
        fenced out). A cancelled run again: nothing; a finished one: refused."""
        return workflows.cancel(self.store, self.clock, run_id, reason)

    def append_steps(
        self,
        run_id: UUID,
        steps: Sequence[StepRequest | Mapping[str, Any]],
        mutation_key: str,
    ) -> RunState:
        """Add steps to a live run, idempotently per ``mutation_key``."""
        return workflows.append_steps(
            self.store, self.clock, run_id, workflows.steps_of(steps), mutation_key
        )

    def recover(
        self, run_id: UUID, from_step: str, reason: str, request_key: str
    ) -> WorkflowStarted:
        """A new run of a finished run that re-runs ``from_step`` and what follows it,
        reusing the other succeeded steps' outputs; idempotent per ``request_key``."""
        return workflows.recover(
            self.store,
            self.clock,
            run_id,
            from_step=from_step,
            reason=reason,
            request_key=request_key,
        )
