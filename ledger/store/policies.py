"""Policies inside a unit of work: follow-up events appended before COMMIT.

``UnitOfWork.append`` folds the events it was given, then — only when the store has policies
(:attr:`Store.policies <ledger.store.store.Store.policies>`, empty by default: then nothing
here runs and no query is added) — calls :func:`follow_policies` before it writes anything.
That runs the pure :func:`ledger.core.policy.cascade`: each round reads and locks the jobs the
reacting policies need (in this transaction; jobs this append already changed are taken from
its fold, not re-read), and folds their follow-ups into the same append, so they are appended,
projected and committed with their trigger like any event — or rolled back with it.

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

from collections.abc import Callable, Mapping, Sequence
from typing import Protocol
from uuid import UUID

from ledger.core.events import JobDefinition
from ledger.core.policy import MAX_CASCADE_DEPTH, JobChange, Policy, Trigger, cascade
from ledger.core.state import DefinitionState, JobState


class JobReads(Protocol):
    """What the policies read through: the unit of work's locked reads."""

    def lock_jobs(self, job_ids: Sequence[UUID]) -> dict[UUID, JobState]: ...

    def definitions(self, job_types: Sequence[str]) -> dict[str, DefinitionState]: ...


def follow_policies(
    policies: Sequence[Policy],
    triggers: list[Trigger],
    folded: Mapping[UUID, JobState],
    unit: JobReads,
    fold: Callable[[list[JobChange]], None],
    *,
    max_depth: int = MAX_CASCADE_DEPTH,
) -> None:
    """Fold the policies' follow-ups of ``triggers`` into the append being built.

    ``folded`` is the append's states so far (newer than the view rows); ``fold(changes)``
    folds more changes into it and appends their triggers to ``triggers``.
    """

    def read(
        job_ids: set[UUID], job_types: set[str]
    ) -> tuple[dict[UUID, JobState], dict[str, JobDefinition]]:
        jobs = unit.lock_jobs(sorted(job_id for job_id in job_ids if job_id not in folded))
        jobs.update((job_id, folded[job_id]) for job_id in job_ids if job_id in folded)
        found = unit.definitions(sorted(job_types)) if job_types else {}
        return jobs, {job_type: state.definition for job_type, state in found.items()}

    def fold_round(changes: list[JobChange]) -> list[Trigger]:
        start = len(triggers)
        fold(changes)
        return triggers[start:]

    cascade(policies, list(triggers), read, fold_round, max_depth=max_depth)
