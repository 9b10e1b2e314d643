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

import heapq
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
    in the order of ``step_of_job``. O(n log n) in the events: the jobs' next events wait
    in a heap, each pushed once it may go (released, and not held behind a run cancel)."""
    return _Merge(run_records, job_records, step_of_job).run()


_JOB_EVENT, _RUN_EVENT, _CAUSED_JOB_EVENT = 0, 1, 2
"""Ranks on a tie of times: the order a unit of work records them in."""


class _Merge:
    def __init__(
        self,
        run_records: Sequence[Record],
        job_records: Mapping[UUID, Sequence[Record]],
        step_of_job: Mapping[UUID, str],
    ) -> None:
        self.run_records = run_records
        self.jobs = {job_id: job_records.get(job_id, ()) for job_id in step_of_job}
        self.step_of_job = step_of_job
        self.rank = {job_id: rank for rank, job_id in enumerate(step_of_job)}
        self.heads = dict.fromkeys(step_of_job, 0)
        self.ready: list[tuple[datetime, int, int, UUID]] = []
        self.released: set[UUID] = set()
        self.held: dict[int, list[UUID]] = {}  # run index -> jobs whose end waits for it
        self.cancelled_by_run = {
            record.event.job_id: index
            for index, record in enumerate(run_records)
            if isinstance(record.event, WorkflowStepCancelled)
            and record.event.code == RUN_CANCELLED
            and record.event.job_id is not None
        }
        self.run_at = 0

    def ended(self, job_id: UUID) -> bool:  # a step's job writes nothing after its end
        return self.heads[job_id] >= len(self.jobs[job_id])

    def offer(self, job_id: UUID) -> None:
        """Queue the job's next event if it has one and it may go now."""
        head, records = self.heads[job_id], self.jobs[job_id]
        if head >= len(records):
            return
        last = head == len(records) - 1
        cancel_at = self.cancelled_by_run.get(job_id)
        if last and cancel_at is not None and cancel_at >= self.run_at:
            self.held.setdefault(cancel_at, []).append(job_id)
            return
        caused = head == 0 or (last and cancel_at is not None)
        rank = _CAUSED_JOB_EVENT if caused else _JOB_EVENT
        heapq.heappush(self.ready, (records[head].event.at, rank, self.rank[job_id], job_id))

    def run_candidate(self) -> tuple[datetime, int, int] | None:
        if self.run_at >= len(self.run_records):
            return None
        record = self.run_records[self.run_at]
        waits_for = _ends_job(record)
        if waits_for is not None and waits_for in self.heads and not self.ended(waits_for):
            return None
        return (record.event.at, _RUN_EVENT, 0)

    def release_all(self) -> None:
        """For a history no decision writes (nothing may go): let every job go."""
        for job_id in self.step_of_job:
            if job_id not in self.released:
                self.released.add(job_id)
                self.offer(job_id)
        for waiting in self.held.values():
            for job_id in waiting:
                self.cancelled_by_run.pop(job_id, None)
                self.offer(job_id)
        self.held.clear()

    def run(self) -> list[TimelineEntry]:
        merged: list[TimelineEntry] = []
        total = len(self.run_records) + sum(len(records) for records in self.jobs.values())
        while len(merged) < total:
            run_key = self.run_candidate()
            if run_key is None and not self.ready:
                self.release_all()
                continue
            if run_key is not None and (not self.ready or run_key <= self.ready[0][:3]):
                merged.append(self.take_run_event())
            else:
                merged.append(self.take_job_event(heapq.heappop(self.ready)[3]))
        return merged

    def take_job_event(self, job_id: UUID) -> TimelineEntry:
        record = self.jobs[job_id][self.heads[job_id]]
        self.heads[job_id] += 1
        self.offer(job_id)
        return TimelineEntry(self.step_of_job[job_id], record)

    def take_run_event(self) -> TimelineEntry:
        index = self.run_at
        record = self.run_records[index]
        self.run_at += 1
        for job_id in self.held.pop(index, ()):  # their ends waited for this cancel
            self.offer(job_id)
        event = record.event
        if isinstance(event, WorkflowStepReleased) and event.job_id in self.heads:
            self.released.add(event.job_id)
            self.offer(event.job_id)
        return TimelineEntry(None, record)
