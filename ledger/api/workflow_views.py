"""What ``workflow timeline`` and ``workflow graph`` show, assembled from the run's stream,
its steps' job streams and the workflow view (for :class:`~ledger.api.reader.Reader`).

The timeline interleaves streams. Each stream keeps its own order; across streams the merge
follows the causes a unit of work records (a step's release before its job's
``job_enqueued``; a job's end before the step end that it triggers; a run's cancel of a step
before its job's ``job_cancelled``), then the events' times, and on a tie the order in which
a unit of work records them: the jobs' own events first (a batch of jobs' ends is the
trigger), then the run's events (which carry their trigger's time), then the jobs' events
those caused (an enqueue, a run cancel's ``job_cancelled``). The store's read of several
streams returns no notification ids, so this is the recorded order wherever a cause, a time
or a unit of work's layout tells two events apart (a test compares it with the log); two
unrelated events of one time and rank show in step order.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import NamedTuple
from uuid import UUID

from ledger.core.codec import Record
from ledger.core.workflows.errors import RUN_CANCELLED
from ledger.core.workflows.events import (
    WorkflowStepCancelled,
    WorkflowStepFailed,
    WorkflowStepReleased,
    WorkflowStepsAppended,
    WorkflowStepSucceeded,
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


def _ends_job(record: Record) -> UUID | None:
    """The job a run event waits for: a step end triggered by its job's end."""
    event = record.event
    if isinstance(event, WorkflowStepSucceeded | WorkflowStepFailed):
        return event.job_id
    if isinstance(event, WorkflowStepCancelled) and event.code != RUN_CANCELLED:
        return event.job_id
    return None


def interleave(
    run_records: Sequence[Record],
    job_records: Mapping[UUID, Sequence[Record]],
    step_of_job: Mapping[UUID, str],
) -> list[TimelineEntry]:
    """The run's and its jobs' events in one order (see the module docstring). Jobs tie
    in the order of ``step_of_job``."""
    order = list(step_of_job)
    heads = {job_id: 0 for job_id in order}
    cancelled_by_run = {
        record.event.job_id: index
        for index, record in enumerate(run_records)
        if isinstance(record.event, WorkflowStepCancelled)
        and record.event.code == RUN_CANCELLED
        and record.event.job_id is not None
    }
    released: set[UUID] = set()
    merged: list[TimelineEntry] = []
    run_at = 0

    def ended(job_id: UUID) -> bool:  # a step's job writes nothing after its end
        return heads[job_id] >= len(job_records.get(job_id, ()))

    while run_at < len(run_records) or any(heads[j] < len(job_records.get(j, ())) for j in order):
        candidates: list[tuple[tuple[datetime, int, int], UUID | None]] = []
        if run_at < len(run_records):
            record = run_records[run_at]
            waits_for = _ends_job(record)
            if waits_for is None or waits_for not in heads or ended(waits_for):
                candidates.append(((record.event.at, 1, 0), None))
        for rank, job_id in enumerate(order):
            records = job_records.get(job_id, ())
            last = heads[job_id] == len(records) - 1
            if last and cancelled_by_run.get(job_id, -1) >= run_at:
                continue  # its job_cancelled follows the run's cancel of its step
            if heads[job_id] < len(records) and job_id in released:
                at = records[heads[job_id]].event.at
                effect = heads[job_id] == 0 or (last and job_id in cancelled_by_run)
                candidates.append(((at, 2 if effect else 0, rank), job_id))
        if not candidates:  # a history no decision writes: fall back to the run's order
            released.update(order)
            continue
        _, chosen = min(candidates, key=lambda candidate: candidate[0])
        if chosen is None:
            record = run_records[run_at]
            run_at += 1
            if isinstance(record.event, WorkflowStepReleased) and record.event.job_id:
                released.add(record.event.job_id)
            merged.append(TimelineEntry(None, record))
        else:
            record = job_records[chosen][heads[chosen]]
            heads[chosen] += 1
            merged.append(TimelineEntry(step_of_job[chosen], record))
    return merged
