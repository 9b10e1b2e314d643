"""A unit of work's savepoints: a nested transaction whose rollback the unit of work forgets too.

:class:`Savepoints` is mixed into :class:`~ledger.store.unit_of_work.UnitOfWork`. The database
rolls back what was done inside a failed savepoint; the unit of work must forget it as well:
the states it folded there (jobs, kinds, runs), the release locks it took, and whether it
sent a NOTIFY (rolled back too, so the next append sends it again). The backend supplies the
nested transaction itself (:meth:`Savepoints._savepoint`) and may remember more of its own
(PostgreSQL: whether it holds the events-table lock, released by the rollback).
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import TYPE_CHECKING, Any
from uuid import UUID

if TYPE_CHECKING:
    from ledger.store.job_reads import LoadedJob
    from ledger.store.run_reads import LoadedRun
    from ledger.store.state_reads import AnyKind


class Savepoints:
    """What a unit of work does around a nested transaction (see the module docstring)."""

    _jobs: dict[UUID, LoadedJob]
    _known: dict[AnyKind, dict[Any, Any]]
    _runs: dict[UUID, LoadedRun]
    _run_locks: set[UUID]
    jobs_became_available: bool
    leased_jobs_cancelled: bool

    @contextmanager
    def savepoint(self) -> Iterator[None]:
        """A nested transaction: an error inside rolls back only what was done inside, and
        is raised as a ledger error; the unit of work goes on as if the block never ran."""
        saved = self._remembered()
        try:
            with self._savepoint():
                yield
        except BaseException:
            self._restore(saved)
            raise

    def _remembered(self) -> dict[str, Any]:
        """What the unit of work knows that a rolled-back savepoint must undo: the states
        it folded, and whether a NOTIFY (rolled back too) has been sent."""
        return {
            "_jobs": dict(self._jobs),
            "_known": {kind: dict(states) for kind, states in self._known.items()},
            "_runs": dict(self._runs),
            "_run_locks": set(self._run_locks),
            "jobs_became_available": self.jobs_became_available,
            "leased_jobs_cancelled": self.leased_jobs_cancelled,
        }

    def _restore(self, saved: dict[str, Any]) -> None:
        for name, value in saved.items():
            setattr(self, name, value)

    @abstractmethod
    def _savepoint(self) -> AbstractContextManager[None]: ...
