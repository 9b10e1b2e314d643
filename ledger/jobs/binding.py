"""What a feature namespace's commands are bound to: :class:`LedgerBinding`.

:class:`~ledger.api.ledger.Ledger` hands out each feature's commands
(``ledger.workflows``, ``ledger.schedules``...) bound to its store, clock and enqueue options,
and to its own enqueue and define: a feature that makes jobs (a source poll enqueuing one) goes
through the ledger's, so a ledger that changes them (inline mode works the queue after each
enqueue) changes them for the features too. The features sit below the facade, so they take
this binding, never the ledger itself.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import NamedTuple, Protocol
from uuid import UUID

from ledger.clock import Clock
from ledger.core.enqueue_plan import EnqueuePlan
from ledger.core.values import EnqueueRequest, JobDefinition
from ledger.store.store import Store


class Enqueue(Protocol):
    """A ledger's ``enqueue_outcomes``: ``requests`` in one transaction, all or none."""

    def __call__(
        self, requests: Sequence[EnqueueRequest], *, actor: str | None = None
    ) -> EnqueuePlan: ...


class LedgerBinding(NamedTuple):
    """One ledger's store, clock and job commands, as its feature namespaces use them."""

    store: Store
    clock: Clock
    auto_define: bool
    """Whether enqueue defines unknown job types with the defaults."""
    new_id: Callable[[], UUID]
    """The ledger's job id factory."""
    enqueue: Enqueue
    """The ledger's ``enqueue_outcomes``."""
    define: Callable[..., JobDefinition]
    """The ledger's ``define`` (its keyword options)."""
