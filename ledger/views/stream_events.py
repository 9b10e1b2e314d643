"""Where a stored event stands in the history: :class:`StreamEvent`, one event as a reader of
the events table gets it, and :class:`TailPosition`, how far a tailing reader has read.

Their own module (not :mod:`ledger.views.rows_from_history`, which re-exports them) so the store's
read seam can name them without importing the replay's rules and the view catalog.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from uuid import UUID

    from ledger.core.events import Event


class StreamEvent(NamedTuple):
    """One stored event: its notification id (position), stream, version in it, and event;
    ``transaction_id`` is its writing transaction where a tailing read returned it (0
    otherwise, and always on SQLite)."""

    position: int
    originator_id: UUID
    version: int
    event: Event
    transaction_id: int = 0


class TailPosition(NamedTuple):
    """How far a tailing reader has read: the last event it applied, as (writing transaction,
    notification id), the order of the final prefix of the history (docs/architecture.md, "The
    order tailing readers rely on"). Tuples compare in that order; ``(0, 0)`` is the start."""

    transaction_id: int = 0
    position: int = 0

    @classmethod
    def of(cls, item: StreamEvent) -> TailPosition:
        return cls(item.transaction_id, item.position)
