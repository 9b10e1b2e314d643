"""What ``workflow timeline`` and ``workflow graph`` show: the timeline's entries (the run's
events and its steps' jobs' events, read in the log's order by
:meth:`~ledger.api.reader.Reader.workflows.timeline`) and the run's graph, from its requests
and the workflow view.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from ledger.core.codec import Record
from ledger.core.workflows.events import (
    WorkflowStepsAppended,
    WorkflowSubmitted,
)
from ledger.core.workflows.spec import ReleaseMode, StepRequest
from ledger.store.workflow_reads import StepView

RUN = "run"
"""The timeline's source of the run's own events."""


class TimelineEntry(NamedTuple):
    """One event of a run's timeline: ``step`` is the step whose job wrote it (``None``
    for the run's own events)."""

    step: str | None
    record: Record


class Edge(NamedTuple):
    """One dependency: ``dependent`` waits for ``prerequisite``, released per ``mode``."""

    prerequisite: str
    dependent: str
    mode: ReleaseMode


class WorkflowGraph(NamedTuple):
    """A run's steps (in their order, with their statuses) and its dependencies."""

    steps: list[StepView]
    edges: list[Edge]


def step_requests(run_records: Sequence[Record]) -> list[StepRequest]:
    """Every step as asked, submitted then appended, in run order."""
    steps: list[StepRequest] = []
    for record in run_records:
        event = record.event
        if isinstance(event, WorkflowSubmitted):
            steps.extend(event.request.steps)
        elif isinstance(event, WorkflowStepsAppended):
            steps.extend(event.steps)
    return steps


def graph_of(steps: list[StepView], run_records: Sequence[Record]) -> WorkflowGraph:
    """The graph of a run: its step views and the edges its requests asked for."""
    edges = [
        Edge(dependency.step, step.key, dependency.mode)
        for step in step_requests(run_records)
        for dependency in step.depends_on
    ]
    return WorkflowGraph(steps, edges)
