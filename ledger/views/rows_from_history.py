"""Replay: the rows every inline view should hold, derived from the stored history alone.

:class:`Replay` folds the ordered stream of stored events with the same code the live path
uses: each kind of state's declared fold (:data:`ledger.views.registry.KINDS`: its
``evolve`` and, for jobs, :func:`ledger.core.state.evolve` with the written views' rules,
whose named writes are applied to in-memory tables keyed by primary key by the apply each view
declares beside the query's name) and its declared row (:func:`ledger.views.queue.queue_row`
with ``enqueue_seq`` = the position of the job's first event, a kind's ``row``). Pure: no
driver, no clock.

Each stream must come in version order (streams may interleave in any order: notification
ids do not commit in order on PostgreSQL); an event at or below its stream's folded version
is a re-delivery and changes nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Any

from ledger.core.events import Event, JobEvent
from ledger.core.state import IllegalTransitionError, JobState, evolve
from ledger.core.workflows.events import WorkflowEvent
from ledger.core.workflows.state import RunState
from ledger.core.workflows.state import evolve as evolve_run
from ledger.views import registry
from ledger.views.audit import Origin, audit_row
from ledger.views.catalog import by_name
from ledger.views.kind import StateKind, StreamVersion
from ledger.views.queue import queue_row
from ledger.views.registry import APPLIES, WRITTEN, view_writes
from ledger.views.stream_events import StreamEvent, TailPosition
from ledger.views.view import Key, MemoryTable, Row
from ledger.views.workflows import run_row, step_row

if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator
    from uuid import UUID

    from ledger.views.writes import ViewWrite

__all__ = ["Key", "Replay", "Row", "StreamEvent", "TailPosition"]

AnyKind = StateKind[Any, Any]
Apply = Callable[[StreamEvent, Any], bool]
"""Fold one stored event (and its event): whether it was new."""


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
        self._runs: dict[UUID, RunState] = {}
        """Workflow runs, folded from nothing (complete): the workflow view's rows."""
        self._streams: dict[AnyKind, dict[UUID, Any]] = {}
        """The plainly folded kinds' states (job types, tokens, schedules, …), by stream id."""
        self._keyed: dict[str, tuple[AnyKind, dict[Any, UUID]]] = {}
        """Each such kind's view: the kind, and each row key's stream."""
        self._applies: dict[type[Event], Apply] = {}
        """How each event type is folded: by its kind's hook (jobs, runs) or declared fold."""
        for kind in registry.kinds():
            if kind.fold == "job":
                self._applies.update(dict.fromkeys(kind.events, self._apply_job))
            elif kind.fold == "run":
                self._applies.update(dict.fromkeys(kind.events, self._apply_run))
            else:
                self._streams[kind] = {}
                if kind.projection is not None:
                    self._keyed[kind.projection.name] = (kind, {})
                fold = partial(self._apply_stream, kind)
                self._applies.update(dict.fromkeys(kind.events, fold))
        self._tables: dict[str, MemoryTable] = {
            view.projection.name: view.new_table() for view in WRITTEN
        }
        """The written views' expected rows, by view name."""
        self._dirty: dict[str, set[Key]] = {name: set() for name in by_name()}
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
        applies = self._applies
        for item in events:
            event = item.event
            fold = applies.get(type(event)) or self._apply_of(type(event))
            if not fold(item, event):
                continue  # re-delivered: already folded
            self.position = max(self.position, item.position)
            self.applied += 1
        return self.applied - before

    def _apply_of(self, event_type: type[Event]) -> Apply:
        """How an event type no kind lists by name is folded: as its nearest listed base's
        (remembered), else it is not a known event."""
        for listed, fold in list(self._applies.items()):
            if issubclass(event_type, listed):
                self._applies[event_type] = fold
                return fold
        raise IllegalTransitionError(f"not a known event: {event_type.__name__}")

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

    def _apply_stream(self, kind: AnyKind, item: StreamEvent, event: Event) -> bool:
        """Fold one event of a plainly folded kind with its declared ``evolve`` (a stream no
        view folds, such as retention's, has only its audit rows)."""
        if kind.projection is None:
            if kind.origin is not None and self._audits(item):
                origin = kind.origin(StreamVersion(item.version), event)
                self._add_audit_row(item, event, origin)
            return True
        states = self._streams[kind]
        stream = item.originator_id
        previous = states.get(stream)
        if previous is not None and item.version <= previous.version:
            return False
        state = kind.evolve(previous, event)
        own = kind.key(state)
        key = kind.bind_key(own)
        if state.version != item.version or kind.stream_id(own) != stream:
            raise IllegalTransitionError(
                f"event at position {item.position} is version {item.version} of stream "
                f"{stream}, but folds to version {state.version} of {kind.name} {key!r}"
            )
        states[stream] = state
        name = kind.projection.name
        if previous is None:
            self._keyed[name][1][key] = stream
        if self.track_dirty:
            self._dirty[name].add((key,))
        if kind.origin is not None and self._audits(item):
            self._add_audit_row(item, event, kind.origin(state, event))
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
        if name == "audit":
            return self._audit.get(key[0])
        if name == "workflow_runs":
            run = self._runs.get(key[0])
            return None if run is None else run_row(run, run.run_id)
        if name == "workflow_steps":
            return self._step_row(key[0], key[1])
        keyed = self._keyed.get(name)
        if keyed is not None:
            kind, streams = keyed
            stream = streams.get(key[0])
            state = None if stream is None else self._streams[kind][stream]
            return None if state is None else self._row_of(kind, state)
        return self._tables[name].rows.get(key)

    def keys(self, name: str) -> list[Key]:
        """Every primary key view ``name`` should hold."""
        if name == "queue":
            return [(state.job_id,) for state in self._jobs.values()]
        if name == "audit":
            return [(position,) for position in self._audit]
        if name == "workflow_runs":
            return [(run_id,) for run_id in self._runs]
        if name == "workflow_steps":
            return [(run_id, key) for run_id, run in self._runs.items() for key in run.steps]
        if name in self._keyed:
            return [(key,) for key in self._keyed[name][1]]
        return list(self._tables[name].rows)

    def rows(self, name: str) -> Iterator[Row]:
        """Every expected row of view ``name``."""
        if name == "queue":
            seq = self._enqueue_seq
            for job, state in self._jobs.items():
                yield queue_row(state, seq[job], state.job_id)
        elif name == "audit":
            yield from self._audit.values()
        elif name == "workflow_runs":
            for run in self._runs.values():
                yield run_row(run, run.run_id)
        elif name == "workflow_steps":
            for run_id, run in self._runs.items():
                for key, step in run.steps.items():
                    yield step_row(run_id, step, run.dependents[key], step.job_id)
        elif name in self._keyed:
            kind = self._keyed[name][0]
            for state in self._streams[kind].values():
                yield self._row_of(kind, state)
        else:
            yield from self._tables[name].rows.values()

    @staticmethod
    def _row_of(kind: AnyKind, state: Any) -> Row:
        assert kind.row is not None, f"kind {kind.name!r} has a view but no row"
        return kind.row(state)

    def count(self, name: str) -> int:
        if name == "workflow_steps":
            return sum(len(run.steps) for run in self._runs.values())
        return len(self._rows_by_key(name))

    @property
    def views(self) -> tuple[str, ...]:
        """The views this replay derives rows for, in catalogue order."""
        return (*(projection.name for projection in registry.inline()), "audit")

    def _rows_by_key(self, name: str) -> dict[Any, Any]:
        if name == "queue":
            return self._jobs
        if name == "audit":
            return self._audit
        if name == "workflow_runs":
            return self._runs
        if name in self._keyed:
            return self._keyed[name][1]
        return self._tables[name].rows

    def take_dirty(self, name: str) -> set[Key]:
        """The keys of view ``name`` touched since the last call (present or deleted)."""
        dirty, self._dirty[name] = self._dirty[name], set()
        return dirty
