"""The built-in kinds of state by name, for the code that appends and reads them:
``uow.append([TOKENS.change(token_id, [event])])``, ``uow.state(TOKENS, token_id)``,
``store.states(SCHEDULES)``. Each is declared beside its view's rules
(:class:`~projections.rules.kind.StateKind`) and listed, in fold order, by
:mod:`projections.rules.registry`."""

from __future__ import annotations

from projections.rules.definitions import KIND as DEFINITIONS
from projections.rules.kind import Change, StateKind
from projections.rules.queue import KIND as JOBS
from projections.rules.queue_states import KIND as QUEUE_STATES
from projections.rules.retention_stream import KIND as RETENTION
from projections.rules.schedules import KIND as SCHEDULES
from projections.rules.source_polls import KIND as SOURCE_POLLS
from projections.rules.tokens import KIND as TOKENS
from projections.rules.workflows import KIND as RUNS

__all__ = [
    "DEFINITIONS",
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
