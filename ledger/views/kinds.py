"""The built-in kinds of state by name, for the code that appends and reads them:
``uow.append([TOKENS.change(token_id, [event])])``, ``uow.state(TOKENS, token_id)``,
``store.states(SCHEDULES)``. Each is declared beside its view's rules
(:class:`~ledger.views.kind.StateKind`) and listed, in fold order, by
:mod:`ledger.views.registry`."""

from __future__ import annotations

from ledger.views.integrity_stream import KIND as INTEGRITY
from ledger.views.job_types import KIND as DEFINITIONS
from ledger.views.kind import Change, StateKind
from ledger.views.queue import KIND as JOBS
from ledger.views.queue_states import KIND as QUEUE_STATES
from ledger.views.retention_stream import KIND as RETENTION
from ledger.views.schedules import KIND as SCHEDULES
from ledger.views.source_polls import KIND as SOURCE_POLLS
from ledger.views.tokens import KIND as TOKENS
from ledger.views.workflows import KIND as RUNS

__all__ = [
    "DEFINITIONS",
    "INTEGRITY",
    "JOBS",
    "QUEUE_STATES",
    "RETENTION",
    "RUNS",
    "SCHEDULES",
    "SOURCE_POLLS",
    "TOKENS",
    "Change",
    "StateKind",
]
