"""The kinds of state and the inline views, registered once: what the store folds and writes
with the events, what the replay rebuilds and verifies, and what the catalogue lists.

**Kinds of state** (:data:`KINDS`, each a :class:`~ledger.views.kind.StateKind` declared
beside its view's rules), in fold order: job types before the jobs enqueued under them, runs
before the jobs their steps release. A kind declared elsewhere (a test's toy kind) is added with
:func:`register_kind` before a store opens; the store, the replay and the catalogue read them
all from here (:func:`kinds`), so it needs no change to the store.

There are two kinds of inline view:

- **folded** views (:data:`FOLDED`): the queue, the job definitions, the workflow view
  (its runs and steps), the API tokens, the schedules, the source polls and the queue states,
  whose rows are the fold of each stream (one row per job / job type / run / step / token /
  schedule / polled source / queue), written from the folded states;
- **written** views (:data:`WRITTEN`): each a rules module declaring a
  :class:`~ledger.views.view.WrittenView` — its catalogue entry, its pure
  ``writes(event, state)`` and, for every named SQL write it uses, the in-memory apply the
  replay runs instead.

A new inline view is one rules module (with its ``schema_<name>`` and write queries in
``ledger/store/sql/<backend>.sql``) added to :data:`WRITTEN`; the store
(:func:`view_writes`), the replay and the catalogue take it from here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from ledger.core.events import JOB_EVENTS, Event, JobEvent
from ledger.core.state import JobState
from ledger.views import (
    dead_letters,
    integrity_stream,
    job_types,
    queue,
    queue_states,
    rate_buckets,
    retention_stream,
    schedules,
    source_polls,
    sync_state,
    tokens,
    workflows,
)
from ledger.views.kind import REGISTERED, StateKind
from ledger.views.view import Apply, Projection, WrittenView
from ledger.views.writes import ViewWrite

AnyKind = StateKind[Any, Any]

BUILT_IN_KINDS: tuple[AnyKind, ...] = (
    job_types.KIND,
    tokens.KIND,
    schedules.KIND,
    source_polls.KIND,
    queue_states.KIND,
    workflows.KIND,
    queue.KIND,
    retention_stream.KIND,
    integrity_stream.KIND,
)
"""The ledger's own kinds, in fold order."""

KINDS: list[AnyKind] = list(BUILT_IN_KINDS)
"""Every kind of state, in fold order: the built-in ones, then those registered."""
FOLD_ORDER: dict[AnyKind, int] = {kind: n for n, kind in enumerate(KINDS)}
"""Each kind's place in :data:`KINDS`: an append folds its changes in this order."""
KIND_OF_EVENT: dict[type[Event], AnyKind] = {cls: kind for kind in KINDS for cls in kind.events}
"""The kind whose streams hold each event type (the replay's one lookup per event)."""


def kinds() -> tuple[AnyKind, ...]:
    """Every kind of state, in fold order."""
    return tuple(KINDS)


def register_kind(kind: AnyKind) -> None:
    """Add a kind declared outside the ledger (folded after the built-in ones). Register it
    before a store opens: the store takes the kind's own SQL (:attr:`StateKind.sql`) then."""
    if any(known.name == kind.name for known in KINDS):
        raise ValueError(f"a kind named {kind.name!r} is already registered")
    taken = [cls.name for cls in kind.events if cls in KIND_OF_EVENT]
    if taken:
        raise ValueError(f"events of another kind: {', '.join(taken)}")
    KINDS.append(kind)
    REGISTERED.append(kind)
    FOLD_ORDER[kind] = len(KINDS) - 1
    KIND_OF_EVENT.update(dict.fromkeys(kind.events, kind))


def unregister_kind(kind: AnyKind) -> None:
    """Remove a kind :func:`register_kind` added."""
    if kind in BUILT_IN_KINDS:
        raise ValueError(f"{kind.name!r} is a built-in kind")
    KINDS.remove(kind)
    REGISTERED.remove(kind)
    FOLD_ORDER.clear()
    FOLD_ORDER.update({known: n for n, known in enumerate(KINDS)})
    for cls in kind.events:
        KIND_OF_EVENT.pop(cls, None)


@contextmanager
def registered(kind: AnyKind) -> Iterator[AnyKind]:
    """:func:`register_kind` for the block's length."""
    register_kind(kind)
    try:
        yield kind
    finally:
        unregister_kind(kind)


def registered_views() -> tuple[Projection, ...]:
    """The views of the kinds registered beyond the built-in ones, in registration order."""
    return tuple(kind.projection for kind in REGISTERED if kind.projection is not None)


FOLDED: tuple[Projection, ...] = (
    queue.PROJECTION,
    job_types.PROJECTION,
    workflows.RUNS,
    workflows.STEPS,
    tokens.PROJECTION,
    schedules.PROJECTION,
    source_polls.PROJECTION,
    queue_states.PROJECTION,
)
"""The built-in kinds' views (a run's kind has two: its runs and its steps), in catalogue
order."""
WRITTEN: tuple[WrittenView[Any], ...] = (sync_state.VIEW, dead_letters.VIEW, rate_buckets.VIEW)

INLINE: tuple[Projection, ...] = (*FOLDED, *(view.projection for view in WRITTEN))
"""Every built-in inline view's catalogue entry, in catalogue order."""


def inline() -> tuple[Projection, ...]:
    """Every inline view's catalogue entry, in catalogue order: the built-in ones, then the
    registered kinds' views."""
    return (*INLINE, *registered_views())


Rule = Callable[[JobEvent, JobState], list[ViewWrite]]


def _rules_for(event_type: type[JobEvent]) -> tuple[Rule, ...]:
    """The written views' rules that may write for ``event_type``, in registry order."""
    return tuple(view.writes for view in WRITTEN if issubclass(event_type, view.events))


_RULES_BY_TYPE: dict[type[JobEvent], tuple[Rule, ...]] = {
    cls: _rules_for(cls) for cls in JOB_EVENTS
}


def view_writes(event: JobEvent, state: JobState) -> list[ViewWrite]:
    """Every written view's writes for ``event`` (given the job's state after it), in
    registry order: the order the store runs them and the replay applies them. Only the
    views that declare the event's type are asked (:attr:`WrittenView.events`)."""
    rules = _RULES_BY_TYPE.get(type(event))
    if rules is None:
        rules = _rules_for(type(event))
    found: list[ViewWrite] = []
    for rule in rules:
        found += rule(event, state)
    return found


def _applies() -> dict[str, tuple[str, Apply[Any]]]:
    found: dict[str, tuple[str, Apply[Any]]] = {}
    for view in WRITTEN:
        for query, apply in view.applies.items():
            if query in found:
                raise ValueError(f"view write {query!r} is declared by two views")
            found[query] = (view.projection.name, apply)
    return found


APPLIES: dict[str, tuple[str, Apply[Any]]] = _applies()
"""Each named write: the view it belongs to and its in-memory apply."""
