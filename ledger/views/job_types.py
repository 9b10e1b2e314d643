"""The job-type view: one row per job type, the fold of its definition stream."""

from __future__ import annotations

from typing import Any
from uuid import UUID, uuid5

import msgspec

from ledger.core.events import DEFINITION_EVENTS
from ledger.core.rates import interval_us, rate_scope
from ledger.core.state import DefinitionState, evolve_definition
from ledger.core.values import JobDefinition, RateLimit
from ledger.views.kind import StateKind
from ledger.views.view import Projection

JOB_TYPE_NAMESPACE = UUID("6f3c1d0e-7a52-4c8e-9b1e-4a8f2f1d2c55")


def job_type_stream_id(job_type: str) -> UUID:
    """The originator id of a job type's definition stream (stable across databases)."""
    return uuid5(JOB_TYPE_NAMESPACE, f"job_type:{job_type}")


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
    its buckets are kept (:mod:`ledger.views.rate_buckets`), so the claim queries tell
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


def decode_definition_row(state: bytes, stream_version: int) -> DefinitionState:
    """A ``jl_definitions`` row (its encoded state and stream version) as a state."""
    return DefinitionState(decode_definition(state), stream_version)


def definition_of_row(row: Any) -> DefinitionState:
    """A ``jl_definitions`` row (indexable by column name) as the job type's state."""
    return decode_definition_row(row["state"], row["stream_version"])


KIND: StateKind[str, DefinitionState] = StateKind(
    "definitions",
    DEFINITION_EVENTS,
    evolve_definition,
    job_type_stream_id,
    PROJECTION,
    definition_row,
    definition_of_row,
    upsert="definitions_upsert",
    get_many="definitions_get",
    all="definitions_all",
    key_param="job_types",
    key_of=lambda state: state.definition.job_type,
)
"""Job types' definitions, by type. Folded first: a ``job_type_defined`` must precede the
jobs enqueued under it."""
