"""A unit of work's reads of the other views: each kind's states, the due schedules, sync state.

:class:`StateReads` is mixed into :class:`~ledger.store.unit_of_work.UnitOfWork`, beside
:class:`~ledger.store.job_reads.JobReads` (the queue) and
:class:`~ledger.store.run_reads.RunReads` (the workflow runs). The states of the plainly folded
kinds (job types, tokens, …: :mod:`ledger.views.kind`) are remembered by kind and key: an
append folds onto what its unit of work read or wrote (the view is asked only for a key it
has not), and writes back what it changed (:mod:`ledger.store.view_row_writes`).
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from ledger.store.ids import IdAdapter
from ledger.store.kind_reads import read_all, read_states
from ledger.views.kind import StateKind
from ledger.views.schedules import schedule_of_row

if TYPE_CHECKING:
    from ledger.core.schedules.state import ScheduleState

AnyKind = StateKind[Any, Any]
K = TypeVar("K")
S = TypeVar("S")


class StateReads:
    """The kinds' half of a unit of work's reads (see the module docstring)."""

    _ids: IdAdapter
    _known: dict[AnyKind, dict[Any, Any]]

    @abstractmethod
    def _rows(self, query: str, params: dict[str, Any]) -> Sequence[Any]: ...

    def state(self, kind: StateKind[K, S], key: K) -> S | None:
        """The state of ``kind``'s ``key`` as this unit of work last read or wrote it (read
        from the kind's view if it has not): ``None`` if there is none."""
        return self.states(kind, [key]).get(key)

    def states(self, kind: StateKind[K, S], keys: Sequence[K]) -> dict[K, S]:
        """The states of those of ``keys`` that exist (:meth:`state`), by key, in the order
        asked; read in one query where the kind has one for many keys (job types)."""
        known = self._known.setdefault(kind, {})
        wanted = [key for key in dict.fromkeys(keys) if key not in known]
        if wanted:
            known.update(self._fetch_states(kind, wanted))
        return {key: known[key] for key in keys if key in known}

    def _fetch_states(self, kind: AnyKind, keys: Sequence[Any]) -> dict[Any, Any]:
        """Read the states of ``keys`` from ``kind``'s view (those that exist), by key."""
        return read_states(kind, keys, self._rows, self._ids)

    def all_states(self, kind: StateKind[K, S]) -> list[S]:
        """Every state of ``kind``, read now (and remembered), in its ``all`` query's
        order."""
        found = read_all(kind, lambda query: self._rows(query, {}))
        if kind.key_of is not None:
            key_of = kind.key_of
            self._known.setdefault(kind, {}).update((key_of(state), state) for state in found)
        return found

    def due_schedules(self, now_us: int, limit: int) -> list[ScheduleState]:
        """The active schedules whose next slot is at or before ``now_us``, soonest first."""
        rows = self._rows("schedules_due", {"now": now_us, "limit": limit})
        return [schedule_of_row(row) for row in rows]

    def sync_state_rows(self, source_id: str) -> dict[str, str | None]:
        """``{uri: revision}`` of every sync-state row of one source, read in this unit of
        work (a poll diffs against what its own transaction sees)."""
        rows = self._rows("sync_state_of_source", {"source_id": source_id})
        return {row["uri"]: row["revision"] for row in rows}
