"""Policies inside a unit of work: follow-up events appended before COMMIT.

``UnitOfWork.append`` folds the events it was given, then — only when one of its events is
of a type a store policy reacts to (:attr:`Store.policies <ledger.store.store.Store.policies>`:
by default the workflow policy, which reacts to a job's end or requeue; otherwise nothing
here runs and no query is added) — calls :func:`follow_policies` before it writes anything.
That runs the pure :func:`ledger.core.policy.cascade`: each round reads and locks the jobs the
reacting policies need, then the runs (under their release locks, in run-id order; jobs and
runs this append already changed are taken from its fold, not re-read), and folds their
follow-ups into the same append, so they are appended, projected and committed with their
trigger like any event — or rolled back with it.

Locking order (PostgreSQL): the rounds read their jobs before the append takes the events-table
lock, as every writer locks rows before that lock. A unit of work that already holds it (an
earlier append in the same unit, or ``serialise_appends``) locks a policy's jobs after it; a
worker holding such a row while it waits for the table lock is then a deadlock, which
PostgreSQL breaks by failing one of the two transactions (retryable). Policies that need few
jobs, and triggers on worker writes rather than on enqueues, keep that rare.

Follow-up enqueues are decided by the policy alone: the ledger's enqueue rules that read other
jobs (idempotency keys, one live job per sync subject) are not applied; the unique indexes
still hold, and a follow-up that breaks one rolls the unit back.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Protocol
from uuid import UUID

from msgspec.structs import replace

from ledger.core.policy import MAX_CASCADE_DEPTH, Policy, Reaction, Trigger, cascade
from ledger.core.state import DefinitionState, JobState
from ledger.core.values import JobDefinition
from ledger.core.workflows.state import RunState, StepsNotLoadedError
from ledger.store.fold import AppendFold
from ledger.views.kinds import DEFINITIONS, StateKind


class JobReads(Protocol):
    """What the policies read through: the unit of work's locked reads."""

    def lock_jobs(self, job_ids: Sequence[UUID]) -> dict[UUID, JobState]: ...

    def states(
        self, kind: StateKind[str, DefinitionState], keys: Sequence[str]
    ) -> dict[str, DefinitionState]: ...

    def lock_runs(
        self, wanted: Mapping[UUID, Iterable[str]], *, whole: bool = ..., fail_fast: bool = ...
    ) -> dict[UUID, RunState]: ...

    def more_steps(
        self, run_id: UUID, keys: Iterable[str], *, whole: bool = ..., expand: bool = ...
    ) -> RunState: ...


class _UnitRuns:
    """The cascade's run reads: the append's own run states where it changed them (as for
    jobs), else the unit of work's locked reads."""

    def __init__(self, fold: AppendFold, unit: JobReads) -> None:
        self._fold = fold
        self._unit = unit

    def runs(self, wanted: Mapping[UUID, set[str]]) -> Mapping[UUID, RunState]:
        # Locks first, in run-id order, for every wanted run (changed ones hold it already).
        found = self._unit.lock_runs(
            {run_id: keys for run_id, keys in wanted.items() if run_id not in self._fold.runs}
        )
        for run_id, keys in wanted.items():
            if run_id in self._fold.runs:
                found[run_id] = self._with(run_id, keys, whole=False, expand=True)
        return found

    def more(self, missing: StepsNotLoadedError) -> RunState:
        return self._with(missing.run_id, missing.keys, whole=missing.whole)

    def _with(
        self, run_id: UUID, keys: Iterable[str], *, whole: bool, expand: bool = False
    ) -> RunState:
        """The run with ``keys`` loaded (``whole``: all); the append's own state keeps the
        steps it holds, and gets the others from the rows (nothing in this unit changed
        a step it did not load)."""
        current = self._fold.runs.get(run_id)
        if current is not None and current.complete:
            return current  # a run this unit submitted, or loaded whole
        loaded = self._unit.more_steps(run_id, keys, whole=whole, expand=expand)
        if current is None:
            return loaded
        steps = {key: current.steps.get(key, step) for key, step in loaded.steps.items()}
        steps.update(current.steps)
        dependents = {**loaded.dependents, **current.dependents}
        if whole:  # in the run's order, steps this unit appended included
            steps = dict(sorted(steps.items(), key=lambda item: item[1].position))
        current = replace(
            current,
            steps=steps,
            dependents=dependents,
            request=loaded.request if whole else current.request,
            complete=current.complete or whole,
        )
        self._fold.runs[run_id] = current
        return current


def follow_policies(
    policies: Sequence[Policy],
    triggers: list[Trigger],
    fold: AppendFold,
    unit: JobReads,
    *,
    max_depth: int = MAX_CASCADE_DEPTH,
) -> None:
    """Fold the policies' follow-ups of ``triggers`` into the append being built.

    ``fold`` holds the append's states so far (newer than the view rows); its
    ``fold_changes`` folds more changes into it and appends their triggers to ``triggers``.
    """
    folded = fold.states

    def read(
        job_ids: set[UUID], job_types: set[str]
    ) -> tuple[dict[UUID, JobState], dict[str, JobDefinition]]:
        jobs = unit.lock_jobs(sorted(job_id for job_id in job_ids if job_id not in folded))
        jobs.update((job_id, folded[job_id]) for job_id in job_ids if job_id in folded)
        found = unit.states(DEFINITIONS, sorted(job_types)) if job_types else {}
        return jobs, {job_type: state.definition for job_type, state in found.items()}

    def fold_round(changes: list[Reaction]) -> list[Trigger]:
        start = len(triggers)
        fold.fold_changes(changes)
        return triggers[start:]

    cascade(
        policies,
        list(triggers),
        read,
        fold_round,
        runs=_UnitRuns(fold, unit),
        max_depth=max_depth,
    )
