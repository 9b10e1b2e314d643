"""A unit of work's writes of the view rows an append's fold produced, and the wake-ups at commit.

:class:`ViewRowWrites` is mixed into :class:`~ledger.store.unit_of_work.UnitOfWork`, whose
:meth:`~ledger.store.unit_of_work.UnitOfWork.append` calls these after the events are in,
on the same cursor: the queue rows of the jobs folded (inserted for a new job, at its first
event's position; updated otherwise), the rows of the plainly folded kinds' changed states,
the changed runs' and steps' rows (:func:`~ledger.store.run_rows.run_writes`), and the
notifications other processes wake on. What is written is also remembered, so the unit of
work's next read or append sees it. The backend supplies the statements (the ``_write_queue``,
``_execute_writes`` and ``_notify_*`` hooks).
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any
from uuid import UUID

from ledger.store.job_reads import LoadedJob
from ledger.store.run_rows import run_writes
from ledger.views.queue import queue_update_row, queue_values
from ledger.views.writes import ViewWrite

if TYPE_CHECKING:
    from ledger.core.state import JobState
    from ledger.core.workflows.state import RunState
    from ledger.store.fold import AppendFold
    from ledger.store.ids import IdAdapter
    from ledger.store.run_reads import LoadedRun
    from ledger.store.state_reads import AnyKind


class ViewRowWrites:
    """The view half of an append's writes (see the module docstring)."""

    _ids: IdAdapter
    _jobs: dict[UUID, LoadedJob]
    _known: dict[AnyKind, dict[Any, Any]]
    _runs: dict[UUID, LoadedRun]
    jobs_became_available: bool
    leased_jobs_cancelled: bool

    # --- backend hooks ---------------------------------------------------------------------

    @abstractmethod
    def _write_queue(self, inserts: list[tuple[Any, ...]], updates: list[dict[str, Any]]) -> None:
        """Insert new jobs' rows (values in :data:`ledger.views.queue.COLUMNS` order)
        and update the others (``queue_update_row``)."""

    @abstractmethod
    def _execute_writes(self, writes: list[ViewWrite]) -> None:
        """Run projection writes in order (consecutive writes of one query may be batched)."""

    @abstractmethod
    def _notify_jobs_available(self) -> None:
        """Tell other processes, at commit, that jobs may be claimable."""

    @abstractmethod
    def _notify_jobs_cancelled(self) -> None:
        """Tell other processes, at commit, that leased jobs were cancelled (their pools
        stop the handlers)."""

    # --- the rows ---------------------------------------------------------------------------

    def _write_queue_rows(
        self, states: dict[UUID, JobState], first_positions: dict[UUID, int]
    ) -> None:
        inserts: list[tuple[Any, ...]] = []
        updates: list[dict[str, Any]] = []
        for job_id, state in states.items():
            key = self._ids.key(job_id)
            known = self._jobs.get(job_id)
            if known is None:
                seq = first_positions[job_id]
                inserts.append(queue_values(state, seq, key))
            else:
                seq = known.enqueue_seq
                updates.append(queue_update_row(state, key))
            self._jobs[job_id] = LoadedJob(state, seq)
        self._write_queue(inserts, updates)

    def _write_states(self, changed: Mapping[AnyKind, Mapping[Any, Any]]) -> None:
        """The rows of the plainly folded kinds' changed states (their ``upsert``: a stream
        no view folds has none), remembered; a state that wakes workers (a resumed queue)
        tells other processes at commit."""
        for kind, states in changed.items():
            row = kind.row
            if kind.upsert and row is not None:
                writes = [ViewWrite(kind.upsert, row(state)) for state in states.values()]
                self._execute_writes(writes)
            self._known.setdefault(kind, {}).update(states)
            wakes = kind.wakes
            woken = wakes is not None and any(wakes(state) for state in states.values())
            if woken and not self.jobs_became_available:
                self._notify_jobs_available()
                self.jobs_became_available = True

    def _write_run_rows(self, runs: dict[UUID, RunState]) -> None:
        """Each changed run's row and its changed steps' (:func:`run_writes`)."""
        self._execute_writes(run_writes(runs, self._runs, self._ids))

    def _notify(self, fold: AppendFold) -> None:
        """Tell other processes, once per transaction each, that jobs may be claimable and
        that leased jobs were cancelled."""
        if fold.makes_claimable and not self.jobs_became_available:
            self._notify_jobs_available()
            self.jobs_became_available = True
        if fold.cancels_leased and not self.leased_jobs_cancelled:
            self._notify_jobs_cancelled()
            self.leased_jobs_cancelled = True
