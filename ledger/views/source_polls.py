"""The source-polls view: one row per polled source, the fold of its poll stream (its last
poll, that poll's result, its breaker). A rebuild folds the same events to the same rows."""

from __future__ import annotations

from typing import Any

import msgspec

from ledger.core.source_polls.events import SOURCE_POLL_EVENTS
from ledger.core.source_polls.state import (
    SourcePollState,
    evolve_source_poll,
    source_stream_id,
)
from ledger.core.times import opt_us, to_us
from ledger.views.audit import SOURCE_POLL_ORIGIN
from ledger.views.kind import StateKind
from ledger.views.view import Projection

_encoder = msgspec.msgpack.Encoder()
_decoder = msgspec.msgpack.Decoder(SourcePollState)


def decode_source_poll(blob: bytes) -> SourcePollState:
    return _decoder.decode(blob)


PROJECTION = Projection(
    "source_polls",
    1,
    "jl_source_polls",
    ("source",),
    (
        "source",
        "last_poll_at",
        "last_result",
        "failures",
        "breaker_until",
        "stream_version",
        "state",
    ),
    "schema_source_polls",
    tuple(cls.name for cls in SOURCE_POLL_EVENTS),
    description="one row per polled source: its last poll, result and breaker",
    blobs=(("state", decode_source_poll),),
)


def source_poll_row(state: SourcePollState) -> dict[str, Any]:
    """The view row of a source's polls (times as µs since the epoch)."""
    return {
        "source": state.source,
        "last_poll_at": to_us(state.last_poll_at),
        "last_result": state.last_result.value,
        "failures": state.failures,
        "breaker_until": opt_us(state.breaker_until),
        "stream_version": state.version,
        "state": _encoder.encode(state),
    }


def source_poll_of_row(row: Any) -> SourcePollState:
    """A ``jl_source_polls`` row (indexable by column name) as the source's poll state."""
    return decode_source_poll(bytes(row["state"]))


KIND: StateKind[str, SourcePollState] = StateKind(
    "source_polls",
    tuple(SOURCE_POLL_EVENTS),
    evolve_source_poll,
    source_stream_id,
    PROJECTION,
    source_poll_row,
    source_poll_of_row,
    upsert="source_polls_upsert",
    get="source_polls_get",
    all="source_polls_all",
    key_param="source",
    key_of=lambda state: state.source,
    origin=lambda state, event: SOURCE_POLL_ORIGIN,
)
"""Polled sources' poll states, by source."""
