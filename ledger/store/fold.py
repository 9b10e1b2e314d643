"""What one append folds, before anything is written: the pure half of ``UnitOfWork.append``.

:class:`AppendFold` folds a unit of work's new events onto the states it loaded, with the
core's one ``evolve``: the records to append (stream, version, event), each job's new state,
the inline views' named writes (from :mod:`projections.rules.registry`), whether any event may
have made a job claimable, and — only when the store has policies — each event with the state
after it, for them. It does no I/O; the unit of work then writes what it produced.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol, TypeVar
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
from ledger.core.policy import Change, RunEvents, Trigger
from ledger.core.queues import QueueState, evolve_queue, queue_stream_id
from ledger.core.schedules.state import ScheduleState, evolve_schedule, schedule_stream_id
from ledger.core.source_polls.state import (
    SourcePollState,
    evolve_source_poll,
    source_stream_id,
)
from ledger.core.state import DefinitionState, JobState, evolve, evolve_definition
from ledger.core.tokens import TokenState, evolve_token
from ledger.core.values import JobStatus
from ledger.core.workflows.state import RunState
from ledger.core.workflows.state import evolve as evolve_run
from ledger.store.streams import job_type_stream_id
from projections.rules.registry import view_writes
from projections.rules.writes import ViewWrite

K = TypeVar("K", str, UUID)
"""A stream's key in its view: a name or an id."""


class _Versioned(Protocol):
    @property
    def version(self) -> int: ...


S = TypeVar("S", bound=_Versioned)
"""A stream's folded state."""


def _itself(key: UUID) -> UUID:
    return key


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

    def fold_changes(self, changes: Sequence[Change]) -> None:
        """Fold a policy round's changes, in order: runs' and jobs' alike."""
        for change in changes:
            if isinstance(change, RunEvents):
                self.fold_runs([change])
            else:
                self.fold_jobs([change])

    def fold_runs(self, run_changes: Sequence[RunEvents]) -> None:
        """Fold each run's events onto its latest state, stamping each with the run's next
        version (the events table's unique (stream, version) holds for runs as for jobs)."""
        for run_id, run_events in run_changes:
            state = self.runs.get(run_id)
            if state is None:
                state = self.loaded_run(run_id)
            for run_event in run_events:
                state = evolve_run(state, run_event)
                self.records.append((run_id, state.version, run_event))
            if state is not None:
                self.runs[run_id] = state

    def fold_jobs(self, job_changes: Sequence[tuple[UUID, Sequence[JobEvent]]]) -> None:
        """Fold each job's events onto its latest state (this append's, else the loaded one)."""
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

    def fold_streams(
        self,
        changes: Sequence[tuple[K, Sequence[Event]]],
        known: Callable[[K], S | None],
        evolve_one: Callable[[S | None, Event], S],
        stream_id: Callable[[K], UUID],
    ) -> dict[K, S]:
        """Fold the events of streams with a view row each (tokens, schedules, source polls,
        queues) onto their states ``known`` (read in this unit of work); the changed ones, by
        key. ``stream_id`` gives a key's stream (its id, or a uuid5 of its name)."""
        changed: dict[K, S] = {}
        for key, events in changes:
            state = changed.get(key) or known(key)
            for event in events:
                state = evolve_one(state, event)
                self.records.append((stream_id(key), state.version, event))
            assert state is not None
            changed[key] = state
        return changed

    def fold_tokens(
        self,
        token_changes: Sequence[tuple[UUID, Sequence[Event]]],
        known: Callable[[UUID], TokenState | None],
    ) -> dict[UUID, TokenState]:
        """Token events folded (:meth:`fold_streams`); a token's stream id is its id."""
        return self.fold_streams(token_changes, known, evolve_token, _itself)

    def fold_schedules(
        self,
        schedule_changes: Sequence[tuple[str, Sequence[Event]]],
        known: Callable[[str], ScheduleState | None],
    ) -> dict[str, ScheduleState]:
        """Schedule events folded (:meth:`fold_streams`), by name."""
        return self.fold_streams(schedule_changes, known, evolve_schedule, schedule_stream_id)

    def fold_source_polls(
        self,
        source_changes: Sequence[tuple[str, Sequence[Event]]],
        known: Callable[[str], SourcePollState | None],
    ) -> dict[str, SourcePollState]:
        """Source-poll events folded (:meth:`fold_streams`), by source."""
        return self.fold_streams(source_changes, known, evolve_source_poll, source_stream_id)

    def fold_queue_states(
        self,
        queue_changes: Sequence[tuple[str, Sequence[Event]]],
        known: Callable[[str], QueueState | None],
    ) -> dict[str, QueueState]:
        """Queue events folded (:meth:`fold_streams`), by name."""
        return self.fold_streams(queue_changes, known, evolve_queue, queue_stream_id)

    def fold_definitions(
        self,
        definition_changes: Sequence[tuple[str, Sequence[Event]]],
        known: Mapping[str, DefinitionState],
    ) -> dict[str, DefinitionState]:
        """Fold job-type events onto the ``known`` definitions; the changed ones. Definitions
        are folded first: a ``job_type_defined`` must precede the jobs enqueued under it."""
        new_definitions: dict[str, DefinitionState] = {}
        for job_type, events in definition_changes:
            definition = new_definitions.get(job_type) or known.get(job_type)
            stream_id = job_type_stream_id(job_type)
            for event in events:
                definition = evolve_definition(definition, event)
                self.records.append((stream_id, definition.version, event))
            assert definition is not None
            new_definitions[job_type] = definition
        return new_definitions
