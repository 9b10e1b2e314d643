"""The queue-state view: one row per queue ever paused or resumed, the fold of its stream.

The claim queries skip the pending jobs of a queue whose row says ``paused``; a queue without
a row has never been paused.
"""

from __future__ import annotations

from typing import Any

import msgspec

from ledger.core.events import Event
from ledger.core.queue_pauses import (
    QUEUE_EVENTS,
    QueuePaused,
    QueueResumed,
    QueueState,
    evolve_queue,
    queue_stream_id,
)
from ledger.views.audit import Origin, queue_origin
from ledger.views.kind import StateKind
from ledger.views.view import Projection

_encoder = msgspec.msgpack.Encoder()
_decoder = msgspec.msgpack.Decoder(QueueState)


def decode_queue_state(blob: bytes) -> QueueState:
    return _decoder.decode(blob)


PROJECTION = Projection(
    "queue_states",
    1,
    "jl_queue_states",
    ("queue",),
    ("queue", "paused", "stream_version", "state"),
    "schema_states_of_queues",  # not schema_queue_*: those are the queue view's
    tuple(cls.name for cls in QUEUE_EVENTS),
    description="one row per paused or resumed queue: whether it is paused, by whom and why",
    blobs=(("state", decode_queue_state),),
)


def queue_state_row(state: QueueState) -> dict[str, Any]:
    """The view row of a queue."""
    return {
        "queue": state.queue,
        "paused": state.paused,
        "stream_version": state.version,
        "state": _encoder.encode(state),
    }


def queue_state_of_row(row: Any) -> QueueState:
    """A ``jl_queue_states`` row (indexable by column name) as the queue's state."""
    return decode_queue_state(bytes(row["state"]))


def _origin(state: QueueState, event: Event) -> Origin:
    assert isinstance(event, QueuePaused | QueueResumed)
    return queue_origin(event)


KIND: StateKind[str, QueueState] = StateKind(
    "queue_states",
    tuple(QUEUE_EVENTS),
    evolve_queue,
    queue_stream_id,
    PROJECTION,
    queue_state_row,
    queue_state_of_row,
    upsert="queue_states_upsert",
    get="queue_states_get",
    all="queue_states_all",
    key_param="queue",
    key_of=lambda state: state.queue,
    origin=_origin,
    wakes=lambda state: not state.paused,  # a resumed queue's jobs are claimable
)
"""Paused (or resumed) queues, by name."""
