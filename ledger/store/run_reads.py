"""A unit of work's reads of workflow runs: the release lock, then the rows a decision needs.

:class:`RunReads` is mixed into :class:`~ledger.store.unit_of_work.UnitOfWork`. A run is
read only under its **release lock** (PostgreSQL: a transaction advisory lock on
:func:`~ledger.core.workflows.ids.release_lock_key`; SQLite: none, ``BEGIN IMMEDIATE``
already serialises writers), taken in run-id order, after the jobs' rows (the cascade reads
jobs first) and before the run's rows. A job's end waits for it; ``complete`` and
``append`` only try it and fail fast with ``workflow.release_conflict``.

What is loaded is cut to the decision: a job's end loads the run's row, the ended step, its
dependents, the prerequisites of each dependent whose pending count reaches zero, and the
result step. Anything else a decision looks at raises ``StepsNotLoadedError`` in the core,
and :meth:`RunReads.more_steps` loads it. Commands that walk the run load it whole.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NamedTuple
from uuid import UUID

from ledger.core.errors import LedgerError
from ledger.core.workflows.errors import ReleaseConflictError
from ledger.core.workflows.ids import release_lock_key
from ledger.core.workflows.state import RunState, StepState
from ledger.store.ids import IdAdapter
from ledger.views.workflows import (
    add_steps,
    decode_dependents,
    decode_header,
    decode_step,
    resume,
)

StepRow = tuple[StepState, tuple[str, ...]]

LOCK_NOT_AVAILABLE = "55P03"


class LoadedRun(NamedTuple):
    """A run as this unit of work knows it: its state and each step object as its row
    holds it (a step whose object differs after an append is the one to write)."""

    state: RunState
    steps: dict[str, StepState]
    submitted: int
    """How many of its steps the submit gave (the rest were appended)."""


class RunReads:
    """The run half of a unit of work's reads (see the module docstring)."""

    _ids: IdAdapter
    _runs: dict[UUID, LoadedRun]
    _run_locks: set[UUID]

    @abstractmethod
    def _rows(self, query: str, params: dict[str, Any]) -> Sequence[Any]: ...

    def _lock_run(self, key: int, *, wait: bool) -> bool:
        """Take a run's release lock until commit (``wait`` false: only if free now);
        whether it was taken. SQLite: always (its writers are serialised already)."""
        return True

    def lock_runs(
        self,
        wanted: Mapping[UUID, Iterable[str]],
        *,
        whole: bool = False,
        fail_fast: bool = False,
    ) -> dict[UUID, RunState]:
        """The current state of each wanted run that exists, under its release lock (taken
        in run-id order), with at least the named steps loaded (``whole``: all of them).
        ``fail_fast``: a lock held by another transaction is ReleaseConflictError now."""
        found: dict[UUID, RunState] = {}
        for run_id in sorted(wanted):
            self._take_release_lock(run_id, fail_fast=fail_fast)
            state = self._run_state(run_id, set(wanted[run_id]), whole=whole)
            if state is not None:
                found[run_id] = state
        return found

    def _take_release_lock(self, run_id: UUID, *, fail_fast: bool) -> None:
        if run_id in self._run_locks:
            return
        try:
            taken = self._lock_run(release_lock_key(run_id), wait=not fail_fast)
        except LedgerError as error:
            if error.sqlstate != LOCK_NOT_AVAILABLE:
                raise
            # Waited past the transaction's lock timeout (the reaper's): the run's conflict,
            # with the database's own code kept.
            raise ReleaseConflictError(
                f"run {run_id}'s release lock is held past the lock timeout",
                sqlstate=error.sqlstate,
            ) from error
        if not taken:
            raise ReleaseConflictError(
                f"run {run_id} is being released by another transaction; try again"
            )
        self._run_locks.add(run_id)

    def _run_state(self, run_id: UUID, keys: set[str], *, whole: bool) -> RunState | None:
        known = self._runs.get(run_id)
        if known is None:
            rows = self._rows("workflow_run_get", {"run_id": self._ids.key(run_id)})
            if not rows:
                return None
            header = decode_header(bytes(rows[0]["header"]))
            known = LoadedRun(
                resume(header, rows[0]["submitted_steps"], (), complete=False),
                {},
                rows[0]["submitted_steps"],
            )
            self._runs[run_id] = known
        if not whole:
            return self._expand(run_id, keys)
        if known.state.complete:
            return known.state
        # The steps this unit already read (and maybe changed) stay as it has them.
        current = known.state
        fresh = self._step_rows("workflow_steps_of_run", run_id)
        rows = [
            (current.steps[step.key], current.dependents[step.key])
            if step.key in current.steps
            else (step, dependents)
            for step, dependents in fresh
        ]
        state = resume(current, known.submitted, rows, complete=True)
        read = {step.key: step for step, _ in fresh}
        self._runs[run_id] = LoadedRun(state, {**read, **known.steps}, known.submitted)
        return state

    def _expand(self, run_id: UUID, keys: set[str]) -> RunState:
        """Load ``keys``, the run's result step, their dependents, and the prerequisites
        of each dependent one end away from release: what a step's end decides on."""
        state = self._runs[run_id].state
        result_step = state.request.result_step
        first = set(keys) | ({result_step} if result_step else set())
        state = self._load(run_id, first)
        dependents = {d for key in keys if key in state.steps for d in state.dependents[key]}
        state = self._load(run_id, dependents)
        prerequisites = {
            dependency.step
            for key in dependents
            if key in state.steps and state.steps[key].pending <= 1
            for dependency in state.steps[key].request.depends_on
        }
        return self._load(run_id, prerequisites)

    def more_steps(
        self, run_id: UUID, keys: Iterable[str], *, whole: bool = False, expand: bool = False
    ) -> RunState:
        """The run (already read in this unit) with ``keys`` loaded too (``whole``: every
        step; ``expand``: and what a step's end reads, as :meth:`lock_runs` loads)."""
        if whole:
            state = self._run_state(run_id, set(), whole=True)
            assert state is not None
            return state
        if expand:
            return self._expand(run_id, set(keys))
        return self._load(run_id, set(keys))

    def _load(self, run_id: UUID, keys: set[str]) -> RunState:
        known = self._runs[run_id]
        wanted = sorted(key for key in keys if key not in known.state.steps)
        if not wanted or known.state.complete:
            return known.state
        params = {"run_id": self._ids.key(run_id), "step_keys": self._ids.values(wanted)}
        rows = _by_key(self._decode_steps(self._rows("workflow_steps_get", params)))
        state = add_steps(known.state, rows)
        steps = {**known.steps, **{key: step for key, (step, _) in rows.items()}}
        self._runs[run_id] = LoadedRun(state, steps, known.submitted)
        return state

    def _loaded_run(self, run_id: UUID) -> RunState | None:
        """A run's state as this unit of work last read or folded it."""
        loaded = self._runs.get(run_id)
        return loaded.state if loaded is not None else None

    def _step_rows(self, query: str, run_id: UUID) -> list[StepRow]:
        return self._decode_steps(self._rows(query, {"run_id": self._ids.key(run_id)}))

    @staticmethod
    def _decode_steps(rows: Sequence[Any]) -> list[StepRow]:
        return [
            (decode_step(bytes(row["state"])), decode_dependents(bytes(row["dependents"])))
            for row in rows
        ]

    def live_step_jobs(self, run_id: UUID) -> list[UUID]:
        """The jobs of a run's enqueued steps, as its rows say now (an unlocked read: a
        cancel locks these jobs' rows before it takes the run's release lock)."""
        rows = self._rows("workflow_live_step_jobs", {"run_id": self._ids.key(run_id)})
        return [self._ids.uuid(row["job_id"]) for row in rows]

    def find_workflow_run(self, workflow_type: str, org: str | None, key: str) -> UUID | None:
        """The run an idempotency key names, if any."""
        params = {"workflow_type": workflow_type, "org": org or "", "idempotency_key": key}
        rows = self._rows("workflow_run_find_idempotent", params)
        return self._ids.uuid(rows[0]["run_id"]) if rows else None


def _by_key(rows: Iterable[StepRow]) -> dict[str, StepRow]:
    return {step.key: (step, dependents) for step, dependents in rows}
