"""The inline views, registered once: what the store writes with the events, what the replay
rebuilds and verifies, and what the catalogue lists.

There are two kinds:

- **folded** views (:data:`FOLDED`): the queue, the job definitions, the workflow view
  (its runs and steps), the API tokens, the schedules, the source polls and the queue states,
  whose rows are the fold of each stream (one row per job / job type / run / step / token /
  schedule / polled source / queue), written from the folded states;
- **written** views (:data:`WRITTEN`): each a rules module declaring a
  :class:`~projections.rules.view.WrittenView` — its catalogue entry, its pure
  ``writes(event, state)`` and, for every named SQL write it uses, the in-memory apply the
  replay runs instead.

A new inline view is one rules module (with its ``schema_<name>`` and write queries in
``ledger/store/sql/<backend>.sql``) added to :data:`WRITTEN`; the store
(:func:`view_writes`), the replay and the catalogue take it from here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ledger.core.events import JOB_EVENTS, JobEvent
from ledger.core.state import JobState
from projections.rules import (
    dead_letters,
    definitions,
    queue,
    queue_states,
    rate_buckets,
    schedules,
    source_polls,
    sync_state,
    tokens,
    workflows,
)
from projections.rules.view import Apply, Projection, WrittenView
from projections.rules.writes import ViewWrite

FOLDED: tuple[Projection, ...] = (
    queue.PROJECTION,
    definitions.PROJECTION,
    workflows.RUNS,
    workflows.STEPS,
    tokens.PROJECTION,
    schedules.PROJECTION,
    source_polls.PROJECTION,
    queue_states.PROJECTION,
)
WRITTEN: tuple[WrittenView[Any], ...] = (sync_state.VIEW, dead_letters.VIEW, rate_buckets.VIEW)

INLINE: tuple[Projection, ...] = (*FOLDED, *(view.projection for view in WRITTEN))
"""Every inline view's catalogue entry, in catalogue order."""

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
