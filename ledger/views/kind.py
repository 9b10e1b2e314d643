"""What a kind of stored state is, declared once (:class:`StateKind`), and one change to it.

A kind of state is a family of event streams, each folded to one state: jobs, job types,
workflow runs, API tokens, schedules, source polls, queue states, the retention stream. Its
entry declares everything the store, the replay and the catalogue need of it:

- its **events** (the replay finds a stream's kind by its event's type) and its pure
  **fold** (``evolve(state | None, event) -> state``, from its core module);
- its **stream id rule** (``stream_id(key)``: the key itself, or a uuid5 of a name);
- its **view** (:class:`~ledger.views.view.Projection`), the **row** a state is
  written as and the state a row reads back as (``row`` / ``of_row``);
- its **named queries**: ``upsert`` (one row), ``get`` (one by key, or ``get_many``: some
  keys in one list parameter) and ``all``, with the parameter the key binds to;
- where the kind has them, its hooks: the **audit origin** of its events, whether a new state
  **wakes** idle workers (a resumed queue), and its own **SQL** (``sql``: ``-- name:``
  queries by backend, for a kind declared outside ``ledger/store/sql``).

Jobs and workflow runs are folded by hooks of their own (``fold``: ``"job"`` / ``"run"``: the
queue's insert-or-update rows, the written views, the policies, the run and step rows), but in
the same one loop as every other kind (:meth:`ledger.store.fold.AppendFold.fold`,
:meth:`ledger.views.rows_from_history.Replay.apply`). The entries are listed, in fold order, by
:mod:`ledger.views.registry`. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, Literal, NamedTuple, TypeVar
from uuid import UUID

from ledger.core.events import Event

if TYPE_CHECKING:
    from ledger.views.audit import Origin
    from ledger.views.view import Projection, Row

K = TypeVar("K")
"""A state's key: a name or an id."""
S = TypeVar("S")
"""A kind's folded state (it has a ``version``: its stream's event count)."""

Fold = Literal["stream", "job", "run"]


def _itself(key: Any) -> Any:
    return key


@dataclass(frozen=True, eq=False)
class StateKind(Generic[K, S]):
    """One kind of state, declared once (see the module docstring). Compared and hashed by
    identity: an entry is the kind."""

    name: str
    events: tuple[type[Event], ...]
    evolve: Callable[[S | None, Event], S]
    stream_id: Callable[[K], UUID]
    projection: Projection | None = None
    """Its view (``None``: a stream no view folds, such as retention's)."""
    row: Callable[[S], Row] | None = None
    of_row: Callable[[Any], S] | None = None
    """A row of :attr:`get` / :attr:`get_many` / :attr:`all` (by column name) as a state."""
    upsert: str = ""
    get: str = ""
    get_many: str = ""
    """Some keys' rows in one query, the keys one list parameter (instead of :attr:`get`)."""
    all: str = ""
    key_param: str = ""
    """The parameter the key (or, for :attr:`get_many`, the list of keys) binds to."""
    bind_key: Callable[[K], Any] = _itself
    """The key as its queries take it and its view's one key column holds it (a token's id
    as text)."""
    binds_id: bool = False
    """Bind the key as the store stores ids (the backend's id adapter) instead."""
    key_of: Callable[[S], K] | None = None
    """A state's key (a kind with a view declares it: the replay keys its rows by it, and
    :attr:`get_many`'s rows come back in any order)."""
    origin: Callable[[S, Event], Origin] | None = None
    """The audit row's origin of each event, given the state after it (``None``: its events
    have no audit rows; a stream no view folds is given its :class:`StreamVersion`)."""
    wakes: Callable[[S], bool] | None = None
    """Whether a new state may make jobs claimable (a resumed queue): idle workers wake."""
    fold: Fold = "stream"
    """How it is folded: ``"stream"`` the plain fold of each key's stream; ``"job"`` and
    ``"run"`` the hooks of jobs and workflow runs."""
    sql: Mapping[str, str] = field(default_factory=dict)
    """Its own named queries (``-- name:`` text by backend), merged into the store's when the
    kind is registered before the store opens; the built-in kinds' are in
    ``ledger/store/sql``."""

    def change(self, key: K, events: Sequence[Event]) -> Change:
        """One change of this kind: ``events`` appended to ``key``'s stream."""
        return (self, key, events)

    def changes(self, pairs: Sequence[tuple[K, Sequence[Event]]]) -> Changes:
        """Changes of many streams of this kind at once, from (key, events) pairs, as they
        are: no tuple is made per stream (a bulk enqueue's or a claim's are one per job)."""
        return Changes(self, pairs)

    def key(self, state: S) -> K:
        """A state's key (:attr:`key_of`: a kind with a view declares it)."""
        assert self.key_of is not None, f"kind {self.name!r} declares no key_of"
        return self.key_of(state)


REGISTERED: list[StateKind[Any, Any]] = []
"""The kinds registered beyond the built-in ones, in registration order: kept by
:func:`ledger.views.registry.register_kind`, and here so that what needs only these (a
store's queries and codec) does not import every rule."""


def registered_events() -> tuple[type[Event], ...]:
    """The event types of the registered kinds (a store's codec reads them too)."""
    return tuple(cls for kind in REGISTERED for cls in kind.events)


Change = tuple[StateKind[Any, Any], Any, Sequence[Event]]
"""Events to append to one stream of one kind: (kind, key, events) (:meth:`StateKind.change`);
``UnitOfWork.append`` takes a list of these and of :class:`Changes`."""


class Changes(NamedTuple):
    """Events to append to many streams of one kind: the kind and its (key, events) pairs
    (:meth:`StateKind.changes`). One per kind rather than a :data:`Change` per stream: a bulk
    enqueue of 5,000 jobs would otherwise make 5,000 more tuples, and the cycle collector's
    extra passes over them cost it ~3% (measured against the pairs passed as they are)."""

    kind: StateKind[Any, Any]
    pairs: Sequence[tuple[Any, Sequence[Event]]]


Appended = Change | Changes
"""What ``UnitOfWork.append`` takes a list of: single changes and batches of one kind."""


class StreamVersion(NamedTuple):
    """The state of a stream no view folds: how many events it holds."""

    version: int


def version_of_row(row: Any) -> StreamVersion:
    """A stream no view folds, as its ``stream_version`` row reads it."""
    return StreamVersion(int(row["version"]))


def count_event(state: StreamVersion | None, event: Event) -> StreamVersion:
    """The fold of a stream no view folds: one more event."""
    return StreamVersion((0 if state is None else state.version) + 1)
