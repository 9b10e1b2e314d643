"""What one append folds, before anything is written: the pure half of ``UnitOfWork.append``.

:class:`AppendFold` folds a unit of work's new events onto the states it loaded, with the
core's one ``evolve``: the records to append (stream, version, event), each job's new state,
the inline views' named writes (from :mod:`ledger.views.registry`), whether any event may
have made a job claimable, and — only when the store has policies — each event with the state
after it, for them. Every kind of state goes through one loop (:meth:`AppendFold.fold`): jobs
and runs through their hooks, every other kind through its declared ``evolve``. It does no
I/O; the unit of work then writes what it produced.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from itertools import chain
from typing import Any, cast
from uuid import UUID

from ledger.core.events import (
    Event,
    JobCancelled,
    JobEnqueued,
    JobEvent,
    JobReleased,
    JobRequeued,
    JobRetryScheduled,
)
from ledger.core.policy import Reaction, RunEvents, Trigger
from ledger.core.state import JobState, evolve
from ledger.core.values import JobStatus
from ledger.core.workflows.events import WorkflowEvent
from ledger.core.workflows.state import RunState
from ledger.core.workflows.state import evolve as evolve_run
from ledger.views.kind import Appended, Changes, StateKind
from ledger.views.registry import FOLD_ORDER, view_writes
from ledger.views.writes import ViewWrite

AnyKind = StateKind[Any, Any]


def _nothing_known(kind: AnyKind, key: Any) -> Any:
    return None


Pairs = Iterable[tuple[Any, Sequence[Event]]]
"""A kind's (key, events) pairs, in the order given."""


def by_kind(changes: Sequence[Appended]) -> list[tuple[AnyKind, Pairs]]:
    """``changes`` (single changes and batches) grouped by kind, in the kinds' fold order
    (:data:`~ledger.views.registry.KINDS`), each kind's pairs in the order given; a batch is
    passed on as it is (no tuple per stream)."""
    groups: dict[AnyKind, list[Sequence[tuple[Any, Sequence[Event]]]]] = {}
    for item in changes:
        if isinstance(item, Changes):
            groups.setdefault(item.kind, []).append(item.pairs)
        else:
            kind, key, events = item
            groups.setdefault(kind, []).append(((key, events),))
    ordered = sorted(groups.items(), key=_fold_order) if len(groups) > 1 else groups.items()
    return [(kind, parts[0] if len(parts) == 1 else chain(*parts)) for kind, parts in ordered]


def _fold_order(group: tuple[AnyKind, object]) -> int:
    return FOLD_ORDER[group[0]]


MAKES_CLAIMABLE = (JobEnqueued, JobReleased, JobRetryScheduled, JobRequeued)
"""Events after which a job may be claimable: they wake idle workers."""


@dataclass
class AppendFold:
    """The records, states and view writes of one append (see the module docstring)."""

    loaded: Callable[[UUID], JobState | None]
    """The state the unit of work read for a job (``None``: not read, or new)."""
    records: list[tuple[UUID, int, Event]] = field(default_factory=list)
    states: dict[UUID, JobState] = field(default_factory=dict)
    view_writes: list[ViewWrite] = field(default_factory=list)
    makes_claimable: bool = False
    cancels_leased: bool = False
    """A job was cancelled while leased: its worker should stop its handler."""
    triggers: list[Trigger] | None = None
    """Each job event with the state after it, for the policies (``None``: there are none)."""
    trigger_types: tuple[type[JobEvent], ...] | None = None
    """The events the policies may react to (``None``: any): only these become triggers."""
    loaded_run: Callable[[UUID], RunState | None] = lambda run_id: None
    """The state the unit of work read for a run (``None``: not read, or new)."""
    runs: dict[UUID, RunState] = field(default_factory=dict)
    """Each changed run's new state."""

    known: Callable[[AnyKind, Any], Any] = _nothing_known
    """The state of a kind's key the unit of work read (``None``: none, or new)."""
    changed: dict[AnyKind, dict[Any, Any]] = field(default_factory=dict)
    """Each plainly folded kind's changed states, by key."""

    def fold(self, changes: Sequence[Appended]) -> None:
        """Fold every change, kind by kind in fold order (job types before the jobs enqueued
        under them, runs before the jobs their steps release): the one loop of an append."""
        for kind, pairs in by_kind(changes):
            if kind.fold == "job":
                self.fold_jobs(cast("Iterable[tuple[UUID, Sequence[JobEvent]]]", pairs))
            elif kind.fold == "run":
                for run_id, events in pairs:
                    self.fold_run(run_id, events)
            else:
                for key, events in pairs:
                    self.fold_stream(kind, key, events)

    def fold_changes(self, changes: Sequence[Reaction]) -> None:
        """Fold a policy round's changes, in order: runs' and jobs' alike."""
        for change in changes:
            if isinstance(change, RunEvents):
                self.fold_runs([change])
            else:
                self.fold_jobs([change])

    def fold_runs(self, run_changes: Sequence[RunEvents]) -> None:
        """Fold each run's events (:meth:`fold_run`)."""
        for run_id, run_events in run_changes:
            self.fold_run(run_id, run_events)

    def fold_run(self, run_id: UUID, run_events: Sequence[Event]) -> None:
        """Fold a run's events onto its latest state, stamping each with the run's next
        version (the events table's unique (stream, version) holds for runs as for jobs)."""
        state = self.runs.get(run_id)
        if state is None:
            state = self.loaded_run(run_id)
        for run_event in run_events:
            assert isinstance(run_event, WorkflowEvent)
            state = evolve_run(state, run_event)
            self.records.append((run_id, state.version, run_event))
        if state is not None:
            self.runs[run_id] = state

    def fold_jobs(self, job_changes: Iterable[tuple[UUID, Sequence[JobEvent]]]) -> None:
        """Fold each job's events onto its latest state (this append's, else the loaded one):
        the job kind's hook (its written views, the policies' triggers, the wake-ups)."""
        for job_id, job_events in job_changes:
            if not job_events:
                continue
            state = self.states.get(job_id)
            if state is None:
                state = self.loaded(job_id)
            for job_event in job_events:
                if type(job_event) is JobCancelled and state is not None:
                    self.cancels_leased |= state.status is JobStatus.LEASED
                state = evolve(state, job_event)
                self.records.append((job_id, state.version, job_event))
                self.view_writes += view_writes(job_event, state)
                if self.triggers is not None and (
                    self.trigger_types is None or isinstance(job_event, self.trigger_types)
                ):
                    self.triggers.append(Trigger(job_id, job_event, state))
                if isinstance(job_event, MAKES_CLAIMABLE):
                    self.makes_claimable = True
            assert state is not None
            self.states[job_id] = state

    def fold_stream(self, kind: AnyKind, key: Any, events: Sequence[Event]) -> None:
        """Fold the events of one stream of a plainly folded kind (job types, tokens,
        schedules, source polls, queues, retention, a registered kind) onto its latest state
        (this append's, else the one the unit of work read), with the kind's ``evolve``, in
        the stream its ``stream_id`` rule names."""
        states = self.changed.setdefault(kind, {})
        state = states.get(key)
        if state is None:
            state = self.known(kind, key)
        stream_id = kind.stream_id(key)
        for event in events:
            state = kind.evolve(state, event)
            self.records.append((stream_id, state.version, event))
        assert state is not None
        states[key] = state
