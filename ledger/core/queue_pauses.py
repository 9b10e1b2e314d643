"""A queue's pause and resume: its events and its fold. Pure.

A queue is a stream of its own, its id derived from its name (:func:`queue_stream_id`), so
every database names it alike. Only paused or resumed queues have a stream: a queue that never
was is running. A paused queue's pending jobs stay pending and are not claimed; its leased ones
finish as usual.
"""

from __future__ import annotations

from datetime import datetime
from uuid import UUID, uuid5

import msgspec

from ledger.core.events import Event
from ledger.core.state import IllegalTransitionError

QUEUE_NAMESPACE = UUID("6f1e2d3c-8b9a-4c5d-9e0f-a1b2c3d4e5f6")


def queue_stream_id(queue: str) -> UUID:
    """The originator id of a queue's stream (stable across databases)."""
    return uuid5(QUEUE_NAMESPACE, f"queue:{queue}")


class QueuePaused(Event, frozen=True):
    """A queue's jobs stop being claimed: running -> paused."""

    name = "queue_paused"
    queue: str
    actor: str | None
    reason: str


class QueueResumed(Event, frozen=True):
    """A queue's jobs are claimed again: paused -> running."""

    name = "queue_resumed"
    queue: str
    actor: str | None
    reason: str


QUEUE_EVENTS: tuple[type[Event], ...] = (QueuePaused, QueueResumed)


class QueueState(msgspec.Struct, frozen=True):
    """A queue as its stream tells it: paused or not, and by whom, when and why last."""

    queue: str
    paused: bool
    changed_at: datetime
    actor: str | None
    reason: str
    version: int


def evolve_queue(state: QueueState | None, event: Event) -> QueueState:
    """Apply one queue event. Pure."""
    if not isinstance(event, QueuePaused | QueueResumed):
        raise IllegalTransitionError(f"not a queue event: {type(event).__name__}")
    pausing = isinstance(event, QueuePaused)
    if state is not None and state.paused == pausing:
        raise IllegalTransitionError(
            f"{event.name} on a {'paused' if state.paused else 'running'} queue {state.queue}"
        )
    if state is None and not pausing:
        raise IllegalTransitionError(f"queue_resumed before queue_paused ({event.queue})")
    return QueueState(
        queue=event.queue,
        paused=pausing,
        changed_at=event.at,
        actor=event.actor,
        reason=event.reason,
        version=1 if state is None else state.version + 1,
    )
