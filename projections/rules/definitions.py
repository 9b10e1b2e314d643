"""The job-type view: one row per job type, the fold of its definition stream."""

from __future__ import annotations

from typing import Any

import msgspec

from ledger.core.events import DEFINITION_EVENTS
from ledger.core.rates import interval_us, rate_scope
from ledger.core.state import DefinitionState
from ledger.core.values import JobDefinition, RateLimit
from projections.rules.view import Projection

_encoder = msgspec.msgpack.Encoder()
_decoder = msgspec.msgpack.Decoder(JobDefinition)


def encode_definition(definition: JobDefinition) -> bytes:
    return _encoder.encode(definition)


def decode_definition(blob: bytes) -> JobDefinition:
    return _decoder.decode(blob)


PROJECTION = Projection(
    "definitions",
    2,
    "jl_definitions",
    ("job_type",),
    (
        "job_type",
        "enabled",
        "version",
        "stream_version",
        "state",
        "rate_limit",
        "rate_interval_us",
        "rate_scope",
    ),
    "schema_definitions",
    tuple(cls.name for cls in DEFINITION_EVENTS),
    description="one row per job type: the fold of its definition stream",
    blobs=(("state", decode_definition),),
)


def definition_row(state: DefinitionState) -> dict[str, Any]:
    """The view row for a job type; ``version`` is the definition's, ``stream_version`` the
    number of events in the type's stream. The rate columns (v2) are the type's rate limit as
    its buckets are kept (:mod:`projections.rules.rate_buckets`), so the claim queries tell
    a limited type, and a bucket of the current policy from one left by an earlier one."""
    rate = state.definition.rate if isinstance(state.definition.rate, RateLimit) else None
    return {
        "job_type": state.definition.job_type,
        "enabled": state.definition.enabled,
        "version": state.definition.version,
        "stream_version": state.version,
        "state": encode_definition(state.definition),
        "rate_limit": None if rate is None else rate.limit,
        "rate_interval_us": None if rate is None else interval_us(rate),
        "rate_scope": None if rate is None else rate_scope(rate),
    }
