"""A handle on one workflow run (``ledger.workflows.handle(run_id)``):
its status, steps and result as the workflow view holds them, and :meth:`WorkflowHandle.wait`
for it to finish."""

from __future__ import annotations

import threading
import time
from typing import Protocol
from uuid import UUID

from ledger.core.values import JSON, WorkflowLink
from ledger.core.workflows.errors import WorkflowNotFoundError
from ledger.core.workflows.status import RunStatus
from ledger.store.store import Store
from ledger.store.workflow_reads import RunView, StepView
from ledger.workflows.prerequisites import prerequisite_outputs


class RunReads(Protocol):
    """What a handle reads through: the workflow reads
    (:class:`~ledger.workflows.workflow_reader.WorkflowReader`)."""

    store: Store

    def run(self, run_id: UUID) -> RunView | None: ...

    def steps(self, run_id: UUID) -> list[StepView]: ...


WAIT_POLL_S = 0.05
"""How often :meth:`WorkflowHandle.wait` looks again (a run's end sends no notification)."""


class WorkflowHandle:
    """One run, read through the workflow reads on each call (a handle holds no state of its
    own)."""

    def __init__(self, reader: RunReads, run_id: UUID) -> None:
        self._reader = reader
        self.run_id = run_id

    def view(self) -> RunView:
        found = self._reader.run(self.run_id)
        if found is None:
            raise WorkflowNotFoundError(f"no workflow run {self.run_id}")
        return found

    def status(self) -> RunStatus:
        return self.view().status

    def steps(self) -> list[StepView]:
        return self._reader.steps(self.run_id)

    def prerequisite_outputs(self, step_key: str) -> dict[str, JSON]:
        """``{key: output}`` of ``step_key``'s prerequisites that succeeded (a failed or
        cancelled one is absent): what its job's handler reads as
        ``ctx.prerequisite_outputs()``."""
        link = WorkflowLink(run_id=self.run_id, step_key=step_key)
        return prerequisite_outputs(self._reader.store, link)

    def result(self) -> JSON | None:
        """The result step's output once the run succeeded (``None`` before, or without)."""
        return self.view().result

    def wait(self, timeout: float) -> RunStatus:
        """Wait up to ``timeout`` seconds (of real time: the run is worked by real
        workers) for the run to finish; its status then, finished or not."""
        deadline = time.monotonic() + timeout
        pause = threading.Event()
        while True:
            status = self.status()
            if status.is_finished or time.monotonic() >= deadline:
                return status
            pause.wait(min(WAIT_POLL_S, max(0.0, deadline - time.monotonic())))
