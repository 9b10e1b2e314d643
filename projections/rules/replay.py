"""Replay: the rows every inline view should hold, derived from the stored history alone.

:class:`Replay` folds the ordered stream of stored events with the same rules the live path
uses — :func:`ledger.core.state.evolve` / :func:`~ledger.core.state.evolve_definition`,
:func:`projections.rules.queue.queue_row` (``enqueue_seq`` = the position of the job's first event),
:func:`projections.rules.definitions.definition_row`, and the
:class:`~projections.rules.writes.ViewWrite`
rules of :mod:`projections.rules.sync_state` and :mod:`projections.rules.dead_letters` applied to
in-memory tables keyed by primary key. Pure: no driver, no clock.

Like a tracking recorder it remembers the last position it applied; an event at or before it
is a re-delivery and changes nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any, NamedTuple
from uuid import UUID

from ledger.core.events import Event, JobEvent, JobTypeDefined, JobTypeUpdated
from ledger.core.state import (
    DefinitionState,
    IllegalTransitionError,
    JobState,
    evolve,
    evolve_definition,
)
from projections.rules import dead_letters, sync_state
from projections.rules.audit import audit_row
from projections.rules.catalog import BY_NAME
from projections.rules.definitions import definition_row
from projections.rules.queue import queue_row
from projections.rules.writes import ViewWrite

Row = dict[str, Any]
Key = tuple[Any, ...]


class StreamEvent(NamedTuple):
    """One stored event: its notification id (position), stream, version in it, and event."""

    position: int
    originator_id: UUID
    version: int
    event: Event


class Replay:
    """The inline views' expected rows after the events applied so far."""

    def __init__(self, *, audit: bool = True, dirty: bool = True) -> None:
        self.position = 0
        """The last position applied (0: none)."""
        self.applied = 0
        # Jobs are keyed by ``job_id.int``: a ``UUID`` hashes and compares in Python code,
        # an int in C, and this runs several times per event.
        self._jobs: dict[int, JobState] = {}
        self._enqueue_seq: dict[int, int] = {}
        self._definitions: dict[str, DefinitionState] = {}
        self._sync_state: dict[Key, Row] = {}
        self._dead_letters: dict[Key, Row] = {}
        self._dead_by_subject: dict[Key, set[Key]] = {}
        self._dirty: dict[str, set[Key]] = {name: set() for name in BY_NAME}
        self.track_dirty = dirty
        """Record the keys each event touches (for :meth:`take_dirty`); off while nobody will
        ask, such as a verify or a rebuild's first pass."""
        self._keep_audit = audit
        """Keep the audit rows (one per job event: the largest table; off when not wanted)."""
        self._audit: dict[int, Row] = {}
        """By position."""

    # --- folding ----------------------------------------------------------------------------

    def apply(self, events: Iterable[StreamEvent]) -> int:
        """Fold ``events`` (in position order); return how many were new."""
        before = self.applied
        for item in events:
            if item.position <= self.position:
                continue  # re-delivered: already folded
            if isinstance(item.event, JobEvent):
                self._apply_job(item, item.event)
            else:
                self._apply_definition(item, item.event)
            self.position = item.position
            self.applied += 1
        return self.applied - before

    def _apply_job(self, item: StreamEvent, event: JobEvent) -> None:
        job = item.originator_id.int
        state = evolve(self._jobs.get(job), event)
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
        if self._keep_audit:
            row = audit_row(item.position, item.originator_id, event, state.job_type, state.org)
            self._audit[item.position] = row
            if self.track_dirty:
                self._dirty["audit"].add((item.position,))
        for write in sync_state.writes(event, state):
            self._apply_write(write)
        for write in dead_letters.writes(event, state):
            self._apply_write(write)

    def _apply_definition(self, item: StreamEvent, event: Event) -> None:
        if not isinstance(event, JobTypeDefined | JobTypeUpdated):
            raise IllegalTransitionError(f"not a known event: {type(event).__name__}")
        job_type = event.definition.job_type
        state = evolve_definition(self._definitions.get(job_type), event)
        if state.version != item.version:
            raise IllegalTransitionError(
                f"event at position {item.position} is version {item.version} of job type "
                f"{job_type!r}, but folds to version {state.version}"
            )
        self._definitions[job_type] = state
        if self.track_dirty:
            self._dirty["definitions"].add((job_type,))

    def _apply_write(self, write: ViewWrite) -> None:
        """Apply one named view write to the in-memory tables, as its SQL does.

        This mirrors the named queries of ``ledger/store/sql/*.sql`` exactly and no further; a new
        write query must be added here too (unknown ones raise):

        - ``sync_state_upsert``: ``INSERT … ON CONFLICT (source_id, uri) DO UPDATE`` with
          ``revision``/``content_hash`` = ``coalesce(new, stored)`` (never erases), the two
          times replaced;
        - ``sync_state_delete``: ``DELETE`` by primary key;
        - ``dead_letters_insert``: a plain ``INSERT`` (a duplicate key would have failed the
          live transaction, so a stored history never holds one);
        - ``dead_letters_delete``: ``DELETE`` by ``job_id``;
        - ``dead_letters_prune_subject``: ``DELETE … WHERE source_id = … AND uri = …``.
        """
        query, params = write
        key: Key
        if query == "sync_state_upsert":
            key = (params["source_id"], params["uri"])
            row = dict(params)
            stored = self._sync_state.get(key)
            if stored is not None:
                for column in ("revision", "content_hash"):
                    if row[column] is None:
                        row[column] = stored[column]
            self._sync_state[key] = row
            self._touch("sync_state", key)
        elif query == "sync_state_delete":
            key = (params["source_id"], params["uri"])
            self._sync_state.pop(key, None)
            self._touch("sync_state", key)
        elif query == "dead_letters_insert":
            job_key: Key = (params["job_id"],)
            self._dead_letters[job_key] = dict(params)
            if params["source_id"] is not None:
                subject = (params["source_id"], params["uri"])
                self._dead_by_subject.setdefault(subject, set()).add(job_key)
            self._touch("dead_letters", job_key)
        elif query == "dead_letters_delete":
            self._drop_dead_letter((params["job_id"],))
        elif query == "dead_letters_prune_subject":
            for key in self._dead_by_subject.pop((params["source_id"], params["uri"]), set()):
                self._drop_dead_letter(key)
        else:
            raise ValueError(f"replay does not know the view write {query!r}")

    def _touch(self, name: str, key: Key) -> None:
        if self.track_dirty:
            self._dirty[name].add(key)

    def _drop_dead_letter(self, key: Key) -> None:
        row = self._dead_letters.pop(key, None)
        self._touch("dead_letters", key)
        if row is not None and row["source_id"] is not None:
            subject = (row["source_id"], row["uri"])
            keys = self._dead_by_subject.get(subject)
            if keys is not None:
                keys.discard(key)
                if not keys:
                    del self._dead_by_subject[subject]

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
        if name == "sync_state":
            return self._sync_state.get(key)
        if name == "dead_letters":
            return self._dead_letters.get(key)
        if name == "audit":
            return self._audit.get(key[0])
        raise KeyError(name)

    def keys(self, name: str) -> list[Key]:
        """Every primary key view ``name`` should hold."""
        if name == "queue":
            return [(state.job_id,) for state in self._jobs.values()]
        if name == "definitions":
            return [(job_type,) for job_type in self._definitions]
        if name == "sync_state":
            return list(self._sync_state)
        if name == "dead_letters":
            return list(self._dead_letters)
        if name == "audit":
            return [(position,) for position in self._audit]
        raise KeyError(name)

    def rows(self, name: str) -> Iterator[Row]:
        """Every expected row of view ``name``."""
        if name == "queue":
            seq = self._enqueue_seq
            for job, state in self._jobs.items():
                yield queue_row(state, seq[job], state.job_id)
        elif name == "audit":
            yield from self._audit.values()
        else:
            for key in self.keys(name):
                row = self.row(name, key)
                assert row is not None
                yield row

    def count(self, name: str) -> int:
        tables: dict[str, dict[Any, Any]] = {
            "queue": self._jobs,
            "definitions": self._definitions,
            "sync_state": self._sync_state,
            "dead_letters": self._dead_letters,
            "audit": self._audit,
        }
        return len(tables[name])

    def take_dirty(self, name: str) -> set[Key]:
        """The keys of view ``name`` touched since the last call (present or deleted)."""
        dirty, self._dirty[name] = self._dirty[name], set()
        return dirty
