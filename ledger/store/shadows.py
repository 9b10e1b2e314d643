"""The rebuild machinery's side of the store: shadow tables, bulk loads, index builds, swap.

A rebuild (:mod:`projections.rebuilder`) loads a projection's rows into a shadow
table, indexes it, keeps it up with the history, then swaps it in under the events-table lock.
These are the steps, one write transaction's worth at a time; each backend implements them
(:mod:`ledger.store.postgres.shadows`: binary COPY, index builds under shadow names and
renames; :mod:`ledger.store.sqlite.shadows`: executemany, indexes built at the swap). The DDL
itself is derived by :mod:`ledger.store.shadow_ddl`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import ClassVar

from ledger.views.view import Key, Projection, Row


class ShadowTables(ABC):
    """Shadow-table steps on one write transaction."""

    concurrent_writers: ClassVar[bool] = False
    """Whether write transactions of other connections may run alongside this one (a
    shadow's index build during the next shadow's load)."""

    @abstractmethod
    def create(self, projection: Projection) -> None:
        """(Re)create the empty shadow table, without its secondary indexes."""

    @abstractmethod
    def index(self, projection: Projection) -> None:
        """After the bulk load: build what the shadow needs before the swap."""

    @abstractmethod
    def insert(self, projection: Projection, rows: list[Row]) -> None:
        """Insert rows (the replay's types) into the shadow, in one statement or batch."""

    @abstractmethod
    def delete(self, projection: Projection, keys: list[Key]) -> None:
        """Delete shadow rows by primary key."""

    @abstractmethod
    def lock_for_swap(self, projections: Sequence[Projection], timeout_s: float) -> None:
        """Exclude every appender and every user of the live tables until commit.

        Raises :class:`~ledger.core.errors.DatabaseBusyError` if a live table's lock is not had
        within ``timeout_s``; the transaction is then unusable and must be retried."""

    @abstractmethod
    def swap(self, projection: Projection) -> None:
        """Replace the live table by the shadow, with the live index names."""

    @abstractmethod
    def drop(self, projection: Projection) -> None:
        """Drop the shadow table (and any of its indexes) if it exists."""
