"""The workflow reads: :class:`WorkflowReader`, what ``reader.workflows`` hands out.

A run's header, steps, history, timeline and graph, and the page of runs; a
:class:`~ledger.workflows.workflow_handle.WorkflowHandle` on one run. Each read is its own
transaction (or snapshot), as every read of the :class:`~ledger.api.reader.Reader` is.
"""

from __future__ import annotations

from typing import Any
from uuid import UUID

from ledger.clock import Clock
from ledger.core.codec import Record
from ledger.core.workflows.events import WorkflowEvent, WorkflowStepReleased
from ledger.deprecation import warn_once
from ledger.store import workflow_reads
from ledger.store.store import Store
from ledger.store.workflow_reads import RunPage, RunView, StepView
from ledger.workflows.workflow_handle import WorkflowHandle
from ledger.workflows.workflow_timeline import TimelineEntry, WorkflowGraph, graph_of


class WorkflowReader:
    """The workflow reads over one store."""

    def __init__(self, store: Store, clock: Clock) -> None:
        self.store = store
        self.clock = clock

    def __call__(self, **filters: Any) -> RunPage:
        """Deprecated: ``reader.workflows(...)`` was :meth:`runs` before the namespace."""
        warn_once("Reader.workflows()", "reader.workflows.runs()")
        return self.runs(**filters)

    def handle(self, run_id: UUID) -> WorkflowHandle:
        """A handle on a run: its status, steps, result, and ``wait``."""
        return WorkflowHandle(self, run_id)

    def run(self, run_id: UUID) -> RunView | None:
        """A run's header as the workflow view holds it (``None``: no such run)."""
        return workflow_reads.run_view(self.store, run_id)

    def history(self, run_id: UUID) -> list[Record]:
        """Every event of a run's own stream, in order (empty if there is no such run)."""
        records = self.store.history(run_id)
        if records and not isinstance(records[0].event, WorkflowEvent):
            return []
        return records

    def steps(self, run_id: UUID) -> list[StepView]:
        """A run's steps in order, each with its job's progress (running, attempt, retries)."""
        return workflow_reads.step_views(self.store, run_id)

    def runs(
        self,
        *,
        workflow_type: str | None = None,
        status: str | None = None,
        org: str | None = None,
        limit: int = 50,
        cursor: str | None = None,
    ) -> RunPage:
        """Runs in submit order, filtered, a page at a time (``cursor``: the previous
        page's ``next_cursor``)."""
        return workflow_reads.run_page(
            self.store,
            workflow_type=workflow_type,
            status=status,
            org=org,
            limit=limit,
            cursor=cursor,
        )

    def timeline(self, run_id: UUID) -> list[TimelineEntry]:
        """Every event of a run's stream and of its steps' jobs' streams in the log's order,
        read in one snapshot (empty: no such run)."""
        with self.store.read_snapshot() as tables:
            run_records = tables.histories([run_id])[run_id]
            if not run_records or not isinstance(run_records[0].event, WorkflowEvent):
                return []
            step_of_job = {
                record.event.job_id: record.event.step_key
                for record in run_records
                if isinstance(record.event, WorkflowStepReleased) and record.event.job_id
            }
            records = tables.in_log_order([run_id, *step_of_job])
        return [TimelineEntry(step_of_job.get(record.originator_id), record) for record in records]

    def graph(self, run_id: UUID) -> WorkflowGraph | None:
        """A run's steps with their statuses and its dependencies (``None``: no such run)."""
        records = self.history(run_id)
        if not records:
            return None
        return graph_of(self.steps(run_id), records)
