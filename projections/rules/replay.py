"""Replay: the rows every inline view should hold, derived from the stored history alone.

:class:`Replay` folds the ordered stream of stored events with the same rules the live path
uses — :func:`ledger.core.state.evolve` / :func:`~ledger.core.state.evolve_definition`,
:func:`projections.rules.queue.queue_row` (``enqueue_seq`` = the position of the job's first event),
:func:`projections.rules.definitions.definition_row`, and the written views' rules
(:data:`projections.rules.registry.WRITTEN`), whose named writes are applied to in-memory
tables keyed by primary key by the apply each view declares beside the query's name. Pure: no
driver, no clock.

Each stream must come in version order (streams may interleave in any order: notification
ids do not commit in order on PostgreSQL); an event at or below its stream's folded version
is a re-delivery and changes nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

from ledger.core.events import Event, JobEvent, JobTypeDefined, JobTypeUpdated
from ledger.core.queues import (
    QUEUE_EVENTS,
    QueuePaused,
    QueueResumed,
    QueueState,
    evolve_queue,
    queue_stream_id,
)
from ledger.core.retention import RETENTION_EVENTS
from ledger.core.schedules.events import SCHEDULE_EVENTS, ScheduleEvent
from ledger.core.schedules.state import ScheduleState, evolve_schedule, schedule_stream_id
from ledger.core.source_polls.events import SOURCE_POLL_EVENTS, SourcePollEvent
from ledger.core.source_polls.state import (
    SourcePollState,
    evolve_source_poll,
    source_stream_id,
)
from ledger.core.state import (
    DefinitionState,
    IllegalTransitionError,
    JobState,
    evolve,
    evolve_definition,
)
from ledger.core.tokens import TokenCreated, TokenRevoked, TokenState, evolve_token
from ledger.core.workflows.events import WorkflowEvent
from ledger.core.workflows.state import RunState
from ledger.core.workflows.state import evolve as evolve_run
from projections.rules.audit import (
    RETENTION_ORIGIN,
    SOURCE_POLL_ORIGIN,
    Origin,
    audit_row,
    queue_origin,
)
from projections.rules.catalog import BY_NAME
from projections.rules.definitions import definition_row
from projections.rules.queue import queue_row
from projections.rules.queue_states import queue_state_row
from projections.rules.registry import APPLIES, WRITTEN, view_writes
from projections.rules.schedules import schedule_row
from projections.rules.source_polls import source_poll_row
from projections.rules.stream_events import StreamEvent, TailPosition
from projections.rules.tokens import token_row
from projections.rules.view import Key, MemoryTable, Row
from projections.rules.workflows import run_row, step_row

if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator
    from uuid import UUID

    from projections.rules.writes import ViewWrite

__all__ = ["Key", "Replay", "Row", "StreamEvent", "TailPosition"]


_SCHEDULE_EVENTS = tuple(SCHEDULE_EVENTS)
_SOURCE_POLL_EVENTS = tuple(SOURCE_POLL_EVENTS)
_RETENTION_EVENTS = tuple(RETENTION_EVENTS)
_QUEUE_EVENTS = tuple(QUEUE_EVENTS)


class Replay:
    """The inline views' expected rows after the events applied so far."""

    def __init__(
        self, *, audit: bool = True, dirty: bool = True, audit_upto: TailPosition | None = None
    ) -> None:
        self.position = 0
        """The highest position applied (0: none)."""
        self.applied = 0
        # Jobs are keyed by ``job_id.int``: a ``UUID`` hashes and compares in Python code,
        # an int in C, and this runs several times per event.
        self._jobs: dict[int, JobState] = {}
        self._enqueue_seq: dict[int, int] = {}
        self._definitions: dict[str, DefinitionState] = {}
        self._runs: dict[UUID, RunState] = {}
        self._tokens: dict[str, TokenState] = {}
        """API tokens by id (as text, the view's key)."""
        self._schedules: dict[str, ScheduleState] = {}
        """Schedules by name (the view's key)."""
        self._source_polls: dict[str, SourcePollState] = {}
        """Polled sources by name (the view's key)."""
        self._queue_states: dict[str, QueueState] = {}
        """Paused or resumed queues by name (the view's key)."""
        """Workflow runs, folded from nothing (complete): the workflow view's rows."""
        self._tables: dict[str, MemoryTable] = {
            view.projection.name: view.new_table() for view in WRITTEN
        }
        """The written views' expected rows, by view name."""
        self._dirty: dict[str, set[Key]] = {name: set() for name in BY_NAME}
        self.track_dirty = dirty
        """Record the keys each event touches (for :meth:`take_dirty`); off while nobody will
        ask, such as a verify or a rebuild's first pass."""
        self._keep_audit = audit
        """Keep the audit rows (one per job event: the largest table; off when not wanted)."""
        self._audit: dict[int, Row] = {}
        """By position."""
        self._audit_upto = audit_upto
        """Keep only the audit rows of events at or before this tail position (what a tracked
        audit holds once it reached it; the events must carry their transaction ids)."""

    # --- folding ----------------------------------------------------------------------------

    def apply(self, events: Iterable[StreamEvent]) -> int:
        """Fold ``events`` (each stream's in version order); return how many were new."""
        before = self.applied
        for item in events:
            if isinstance(item.event, JobEvent):
                if not self._apply_job(item, item.event):
                    continue  # re-delivered: already folded
            elif isinstance(item.event, WorkflowEvent):
                if not self._apply_run(item, item.event):
                    continue
            elif isinstance(item.event, TokenCreated | TokenRevoked):
                if not self._apply_token(item, item.event):
                    continue
            elif isinstance(item.event, _SCHEDULE_EVENTS):
                if not self._apply_schedule(item, item.event):
                    continue
            elif isinstance(item.event, _SOURCE_POLL_EVENTS):
                if not self._apply_source_poll(item, cast("SourcePollEvent", item.event)):
                    continue
            elif isinstance(item.event, _RETENTION_EVENTS):
                # No inline view folds retention's stream; its events have audit rows.
                if self._audits(item):
                    self._add_audit_row(item, item.event, RETENTION_ORIGIN)
            elif isinstance(item.event, _QUEUE_EVENTS):
                if not self._apply_queue(item, item.event):
                    continue
            elif not self._apply_definition(item, item.event):
                continue
            self.position = max(self.position, item.position)
            self.applied += 1
        return self.applied - before

    def _apply_job(self, item: StreamEvent, event: JobEvent) -> bool:
        job = item.originator_id.int
        previous = self._jobs.get(job)
        if previous is not None and item.version <= previous.version:
            return False
        state = evolve(previous, event)
        if state.version != item.version or state.job_id.int != job:
            raise IllegalTransitionError(
                f"event at position {item.position} is version {item.version} of stream "
                f"{item.originator_id}, but folds to version {state.version} of {state.job_id}"
            )
        self._jobs[job] = state
        if state.version == 1:
            self._enqueue_seq[job] = item.position
        if self.track_dirty:
            self._dirty["queue"].add((item.originator_id,))
        if self._audits(item):
            link = state.workflow
            origin = Origin(
                state.job_type,
                state.org,
                None if link is None else link.run_id,
                None if link is None else link.step_key,
            )
            self._add_audit_row(item, event, origin)
        for write in view_writes(event, state):
            self._apply_write(write)
        return True

    def _apply_run(self, item: StreamEvent, event: WorkflowEvent) -> bool:
        run_id = item.originator_id
        previous = self._runs.get(run_id)
        if previous is not None and item.version <= previous.version:
            return False
        state = evolve_run(previous, event)
        if state.version != item.version:
            raise IllegalTransitionError(
                f"event at position {item.position} is version {item.version} of run "
                f"{run_id}, but folds to version {state.version}"
            )
        self._runs[run_id] = state
        if self._audits(item):
            asked = state.request
            self._add_audit_row(item, event, Origin(asked.workflow_type, asked.org, run_id))
        if self.track_dirty:
            self._dirty["workflow_runs"].add((run_id,))
            before = previous.steps if previous is not None else {}
            self._dirty["workflow_steps"].update(
                (run_id, key) for key, step in state.steps.items() if before.get(key) is not step
            )
        return True

    def _audits(self, item: StreamEvent) -> bool:
        """Whether this replay keeps the audit row of ``item`` (a catch-up keeps those up to
        where the live audit view has caught up)."""
        return self._keep_audit and (
            self._audit_upto is None or TailPosition.of(item) <= self._audit_upto
        )

    def _add_audit_row(
        self, item: StreamEvent, event: JobEvent | WorkflowEvent | Event, origin: Origin
    ) -> None:
        self._audit[item.position] = audit_row(item.position, item.originator_id, event, origin)
        if self.track_dirty:
            self._dirty["audit"].add((item.position,))

    def _step_row(self, run_id: UUID, key: str) -> Row | None:
        state = self._runs.get(run_id)
        step = state.steps.get(key) if state is not None else None
        if state is None or step is None:
            return None
        return step_row(run_id, step, state.dependents[key], step.job_id)

    def _apply_definition(self, item: StreamEvent, event: Event) -> bool:
        if not isinstance(event, JobTypeDefined | JobTypeUpdated):
            raise IllegalTransitionError(f"not a known event: {type(event).__name__}")
        job_type = event.definition.job_type
        previous = self._definitions.get(job_type)
        if previous is not None and item.version <= previous.version:
            return False
        state = evolve_definition(previous, event)
        if state.version != item.version:
            raise IllegalTransitionError(
                f"event at position {item.position} is version {item.version} of job type "
                f"{job_type!r}, but folds to version {state.version}"
            )
        self._definitions[job_type] = state
        if self.track_dirty:
            self._dirty["definitions"].add((job_type,))
        return True

    def _apply_token(self, item: StreamEvent, event: TokenCreated | TokenRevoked) -> bool:
        key = str(event.token_id)
        previous = self._tokens.get(key)
        if previous is not None and item.version <= previous.version:
            return False
        state = evolve_token(previous, event)
        if state.version != item.version or state.token_id != item.originator_id:
            raise IllegalTransitionError(
                f"event at position {item.position} is version {item.version} of stream "
                f"{item.originator_id}, but folds to version {state.version} of token {key}"
            )
        self._tokens[key] = state
        if self.track_dirty:
            self._dirty["tokens"].add((key,))
        return True

    def _apply_schedule(self, item: StreamEvent, event: Event) -> bool:
        name = cast("ScheduleEvent", event).schedule
        previous = self._schedules.get(name)
        if previous is not None and item.version <= previous.version:
            return False
        state = evolve_schedule(previous, event)
        if state.version != item.version or schedule_stream_id(name) != item.originator_id:
            raise IllegalTransitionError(
                f"event at position {item.position} is version {item.version} of stream "
                f"{item.originator_id}, but folds to version {state.version} of schedule {name}"
            )
        self._schedules[name] = state
        if self.track_dirty:
            self._dirty["schedules"].add((name,))
        if self._audits(item):
            origin = Origin(state.job_type, state.org)
            self._add_audit_row(item, cast("ScheduleEvent", event), origin)
        return True

    def _apply_source_poll(self, item: StreamEvent, event: SourcePollEvent) -> bool:
        source = event.source
        previous = self._source_polls.get(source)
        if previous is not None and item.version <= previous.version:
            return False
        state = evolve_source_poll(previous, event)
        if state.version != item.version or source_stream_id(source) != item.originator_id:
            raise IllegalTransitionError(
                f"event at position {item.position} is version {item.version} of stream "
                f"{item.originator_id}, but folds to version {state.version} of source {source}"
            )
        self._source_polls[source] = state
        if self.track_dirty:
            self._dirty["source_polls"].add((source,))
        if self._audits(item):
            self._add_audit_row(item, event, SOURCE_POLL_ORIGIN)
        return True

    def _apply_queue(self, item: StreamEvent, event: Event) -> bool:
        name = cast("QueuePaused | QueueResumed", event).queue
        previous = self._queue_states.get(name)
        if previous is not None and item.version <= previous.version:
            return False
        state = evolve_queue(previous, event)
        if state.version != item.version or queue_stream_id(name) != item.originator_id:
            raise IllegalTransitionError(
                f"event at position {item.position} is version {item.version} of stream "
                f"{item.originator_id}, but folds to version {state.version} of queue {name}"
            )
        self._queue_states[name] = state
        if self.track_dirty:
            self._dirty["queue_states"].add((name,))
        if self._audits(item):
            queue_event = cast("QueuePaused | QueueResumed", event)
            self._add_audit_row(item, queue_event, queue_origin(queue_event))
        return True

    def _apply_write(self, write: ViewWrite) -> None:
        """Apply one named view write to its view's in-memory table, as its SQL does (by the
        apply the view declares for that query; an undeclared one raises)."""
        query, params = write
        try:
            name, apply = APPLIES[query]
        except KeyError:
            raise ValueError(f"replay does not know the view write {query!r}") from None
        touched = apply(self._tables[name], params)
        if self.track_dirty:
            self._dirty[name].update(touched)

    # --- the rows ---------------------------------------------------------------------------

    def row(self, name: str, key: Key) -> Row | None:
        """The expected row of view ``name`` with primary key ``key``, if there is one."""
        if name == "queue":
            job = key[0].int
            state = self._jobs.get(job)
            if state is None:
                return None
            return queue_row(state, self._enqueue_seq[job], state.job_id)
        if name == "definitions":
            definition = self._definitions.get(key[0])
            return None if definition is None else definition_row(definition)
        if name == "audit":
            return self._audit.get(key[0])
        if name == "workflow_runs":
            run = self._runs.get(key[0])
            return None if run is None else run_row(run, run.run_id)
        if name == "workflow_steps":
            return self._step_row(key[0], key[1])
        if name == "tokens":
            token = self._tokens.get(key[0])
            return None if token is None else token_row(token)
        if name == "schedules":
            schedule = self._schedules.get(key[0])
            return None if schedule is None else schedule_row(schedule)
        if name == "source_polls":
            polls = self._source_polls.get(key[0])
            return None if polls is None else source_poll_row(polls)
        if name == "queue_states":
            queue = self._queue_states.get(key[0])
            return None if queue is None else queue_state_row(queue)
        return self._tables[name].rows.get(key)

    def keys(self, name: str) -> list[Key]:
        """Every primary key view ``name`` should hold."""
        if name == "queue":
            return [(state.job_id,) for state in self._jobs.values()]
        if name == "definitions":
            return [(job_type,) for job_type in self._definitions]
        if name == "audit":
            return [(position,) for position in self._audit]
        if name == "workflow_runs":
            return [(run_id,) for run_id in self._runs]
        if name == "workflow_steps":
            return [(run_id, key) for run_id, run in self._runs.items() for key in run.steps]
        if name == "tokens":
            return [(key,) for key in self._tokens]
        if name == "schedules":
            return [(key,) for key in self._schedules]
        if name == "source_polls":
            return [(key,) for key in self._source_polls]
        if name == "queue_states":
            return [(key,) for key in self._queue_states]
        return list(self._tables[name].rows)

    def rows(self, name: str) -> Iterator[Row]:
        """Every expected row of view ``name``."""
        if name == "queue":
            seq = self._enqueue_seq
            for job, state in self._jobs.items():
                yield queue_row(state, seq[job], state.job_id)
        elif name == "definitions":
            for definition in self._definitions.values():
                yield definition_row(definition)
        elif name == "audit":
            yield from self._audit.values()
        elif name == "workflow_runs":
            for run in self._runs.values():
                yield run_row(run, run.run_id)
        elif name == "workflow_steps":
            for run_id, run in self._runs.items():
                for key, step in run.steps.items():
                    yield step_row(run_id, step, run.dependents[key], step.job_id)
        elif name == "tokens":
            for token in self._tokens.values():
                yield token_row(token)
        elif name == "schedules":
            for schedule in self._schedules.values():
                yield schedule_row(schedule)
        elif name == "source_polls":
            for polls in self._source_polls.values():
                yield source_poll_row(polls)
        elif name == "queue_states":
            for queue in self._queue_states.values():
                yield queue_state_row(queue)
        else:
            yield from self._tables[name].rows.values()

    def count(self, name: str) -> int:
        if name == "workflow_steps":
            return sum(len(run.steps) for run in self._runs.values())
        return len(self._rows_by_key(name))

    @property
    def views(self) -> tuple[str, ...]:
        """The views this replay derives rows for, in catalogue order."""
        return (
            "queue",
            "definitions",
            "workflow_runs",
            "workflow_steps",
            "tokens",
            "schedules",
            "source_polls",
            "queue_states",
            *self._tables,
            "audit",
        )

    def _rows_by_key(self, name: str) -> dict[Any, Any]:
        if name == "queue":
            return self._jobs
        if name == "definitions":
            return self._definitions
        if name == "audit":
            return self._audit
        if name == "workflow_runs":
            return self._runs
        if name == "tokens":
            return self._tokens
        if name == "schedules":
            return self._schedules
        if name == "source_polls":
            return self._source_polls
        if name == "queue_states":
            return self._queue_states
        return self._tables[name].rows

    def take_dirty(self, name: str) -> set[Key]:
        """The keys of view ``name`` touched since the last call (present or deleted)."""
        dirty, self._dirty[name] = self._dirty[name], set()
        return dirty
