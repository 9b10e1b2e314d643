"""What a view is, as the catalogue and the registry hold it.

- :class:`Projection` is a view's catalogue entry: its table, key, columns, schema statements,
  the events that may change it, its mode and version.
- :class:`WrittenView` is an inline view kept by *named writes*: its pure rule maps (event,
  job state after it) to :class:`~ledger.views.writes.ViewWrite` s, which the store runs
  as the named SQL queries of ``ledger/store/sql/<backend>.sql`` and the replay applies to a
  :class:`MemoryTable` with the write's in-memory twin, declared next to the query's name.
  One mapping from query name to apply is what keeps the live path and the replay the same
  set of writes (a test holds every declared name to both backends' SQL files).

The queue and definitions views are not written views: their rows are the fold itself, one
per stream's state (``queue_row`` / ``definition_row``), written by the store and the replay
from the folded states.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Any, Generic, Literal, NamedTuple, TypeVar

import msgspec

from ledger.core.events import JOB_EVENTS, JobEvent
from ledger.core.state import JobState
from ledger.views.writes import ViewWrite

Row = dict[str, Any]
"""One view row, by column, in the replay's Python types."""
Key = tuple[Any, ...]
"""A row's primary key, in the table's key-column order."""
Params = dict[str, Any]
"""A named write's parameters."""
Mode = Literal["inline", "tracked"]
BlobDecoder = Callable[[bytes], msgspec.Struct]

ALL_JOB_EVENTS = tuple(cls.name for cls in JOB_EVENTS)

SHADOW_SUFFIX = "__rebuild"
"""A rebuild writes ``<table>__rebuild`` (and ``<index>__rebuild``) before the swap (here, not
in the catalogue, so the store's DDL helpers name it without importing every view)."""


class Projection(NamedTuple):
    """A view's catalogue entry."""

    name: str
    version: int
    table: str
    key: tuple[str, ...]
    columns: tuple[str, ...]
    schema_prefix: str
    """Its ``schema_*`` statements in ``ledger/sql``: this name and names starting ``<it>_``."""
    events: tuple[str, ...] = ()
    """The events whose application may change its rows (by name); any other event leaves
    them as they are (tested against the replay)."""
    mode: Mode = "inline"
    description: str = ""
    blobs: tuple[tuple[str, BlobDecoder], ...] = ()
    """Columns holding an encoded struct, with its decoder: verify compares them field by
    field and names the field that drifted."""


class MemoryTable:
    """A view's expected rows in memory, by primary key: what its SQL table should hold.

    A view whose writes select rows by something other than the key (a prune by subject)
    subclasses it with the index that write needs."""

    def __init__(self) -> None:
        self.rows: dict[Key, Row] = {}


TableT = TypeVar("TableT", bound=MemoryTable)

Apply = Callable[[TableT, Params], Collection[Key]]
"""The in-memory twin of one named SQL write: change ``table`` as the query changes the
database table, and return the keys it touched (present or deleted afterwards), which a
rebuild rewrites in its shadow."""


@dataclass(frozen=True)
class WrittenView(Generic[TableT]):
    """An inline view kept by named writes, in the same transaction as the events."""

    projection: Projection
    writes: Callable[[JobEvent, JobState], list[ViewWrite]]
    """The writes an event causes, given the job's state after it (pure)."""
    applies: Mapping[str, Apply[TableT]]
    """Every named write :attr:`writes` may produce, with its in-memory apply."""
    new_table: Callable[[], TableT]
    """An empty in-memory table for the replay."""
    events: tuple[type[JobEvent], ...]
    """The event types (and their subclasses) for which :attr:`writes` may write: the store
    and the replay ask it about these only (a job_enqueued, most events of a bulk enqueue,
    then costs no call to a rule that writes nothing for it)."""
