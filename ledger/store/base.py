"""Where the store's names lived before it was split (kept for importers outside the store).

New code imports from the module that owns each name: :mod:`ledger.store.store`,
:mod:`ledger.store.unit_of_work`, :mod:`ledger.store.schema`, :mod:`ledger.store.streams`.
This module only re-exports them, so ``ledger.api`` and older tests keep working until they
move; it defines nothing.
"""

from __future__ import annotations

from ledger.store.schema import EVENTS_TABLE, EXPECTED_TABLES, SCHEMA_VERSION
from ledger.store.store import Store
from ledger.store.streams import JOB_TYPE_NAMESPACE, decode_definition_row, job_type_stream_id
from ledger.store.unit_of_work import LoadedJob, UnitOfWork

__all__ = [
    "EVENTS_TABLE",
    "EXPECTED_TABLES",
    "JOB_TYPE_NAMESPACE",
    "SCHEMA_VERSION",
    "LoadedJob",
    "Store",
    "UnitOfWork",
    "decode_definition_row",
    "job_type_stream_id",
]
