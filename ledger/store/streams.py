"""Stream ids the store derives, and the definitions view's row decoding.

A job's stream id is its job id. A job type's definitions live in a stream of their own whose
id is derived from the type's name, so it is the same in every database (``docs/events.md``).
"""

from __future__ import annotations

from uuid import UUID, uuid5

from ledger.core.state import DefinitionState
from projections.rules.definitions import decode_definition

JOB_TYPE_NAMESPACE = UUID("6f3c1d0e-7a52-4c8e-9b1e-4a8f2f1d2c55")


def job_type_stream_id(job_type: str) -> UUID:
    """The originator id of a job type's definition stream (stable across databases)."""
    return uuid5(JOB_TYPE_NAMESPACE, f"job_type:{job_type}")


def decode_definition_row(state: bytes, stream_version: int) -> DefinitionState:
    """A ``jl_definitions`` row (its encoded state and stream version) as a state."""
    return DefinitionState(decode_definition(state), stream_version)
