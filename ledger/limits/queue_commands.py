"""Queue commands and reads: pause and resume a named queue, and the queues with their counts.

A pause is an event in the queue's own stream (:mod:`ledger.core.queue_pauses`) and a row of the
queue-state view, which the claim queries read: a paused queue's pending jobs stay pending and
are not claimed, its leased ones finish as usual. Pausing a paused queue (or resuming a running
one) appends nothing.
"""

from __future__ import annotations

from datetime import datetime

import msgspec

from ledger.clock import Clock
from ledger.core.limits import check_actor, check_name, check_reason
from ledger.core.queue_pauses import QueuePaused, QueueResumed, QueueState, evolve_queue
from ledger.store.store import Store
from ledger.views.kinds import QUEUE_STATES


class QueueSummary(msgspec.Struct, frozen=True):
    """A queue as ``queue list`` shows it: its live jobs, and whether (and why) it is paused.
    Every queue with a live job or a pause history is listed."""

    queue: str
    paused: bool
    pending: int
    leased: int
    changed_at: datetime | None = None
    """When it was last paused or resumed (``None``: never)."""
    actor: str | None = None
    reason: str | None = None


def set_paused(
    store: Store,
    clock: Clock,
    queue: str,
    paused: bool,
    *,
    reason: str,
    actor: str | None = None,
) -> QueueState | None:
    """Pause (or resume) ``queue``; its state after (``None``: resuming a never-paused
    queue, which appends nothing, as does any change to the state it already has)."""
    check_name(queue, "queue")
    check_reason(reason)
    if actor is not None:
        check_actor(actor)
    with store.unit_of_work() as uow:
        uow.serialise_appends()  # decide on the state no one else can change before commit
        current = uow.state(QUEUE_STATES, queue)
        if (current is not None and current.paused) == paused:
            return current
        now = clock.now()
        event = (
            QueuePaused(at=now, queue=queue, actor=actor, reason=reason)
            if paused
            else QueueResumed(at=now, queue=queue, actor=actor, reason=reason)
        )
        uow.append([QUEUE_STATES.change(queue, [event])])
        return evolve_queue(current, event)


def queue_summaries(store: Store) -> list[QueueSummary]:
    """Every queue with live jobs or a pause history, by name."""
    counts: dict[str, dict[str, int]] = {}
    for row in store.read("queue_live_counts"):
        counts.setdefault(row["queue"], {})[row["status"]] = row["n"]
    states = {state.queue: state for state in store.states(QUEUE_STATES)}
    summaries = []
    for name in sorted(counts.keys() | states.keys()):
        state = states.get(name)
        live = counts.get(name, {})
        summaries.append(
            QueueSummary(
                queue=name,
                paused=state is not None and state.paused,
                pending=live.get("pending", 0),
                leased=live.get("leased", 0),
                changed_at=None if state is None else state.changed_at,
                actor=None if state is None else state.actor,
                reason=None if state is None else state.reason,
            )
        )
    return summaries
