"""Stream ids the store derives, and the definitions view's row decoding.

A job's stream id is its job id. A job type's definitions live in a stream of their own whose
id is derived from the type's name, so it is the same in every database (``docs/events.md``).
Both are declared with the definitions' kind (:mod:`ledger.views.job_types`), and
named here for the store's readers.
"""

from __future__ import annotations

from ledger.views.job_types import (
    JOB_TYPE_NAMESPACE,
    decode_definition_row,
    job_type_stream_id,
)

__all__ = ["JOB_TYPE_NAMESPACE", "decode_definition_row", "job_type_stream_id"]
