"""The batch enqueue's transaction (read what the plan needs, plan, append), and the sync of
a source's listing, which is one batch enqueue.

The decision is :func:`ledger.core.enqueue_plan.plan_enqueue` (pure, tested without a
database); this shell only normalises the requests, serialises the appends when the plan
depends on what the store holds, looks that up, and appends the plan in the same transaction.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from uuid import UUID, uuid4

from ledger.clock import Clock
from ledger.core.enqueue_plan import (
    EnqueuePlan,
    IdempotencyKey,
    KeyedJob,
    SubjectKey,
    idempotency_key,
    plan_enqueue,
    subject_key,
)
from ledger.core.limits import check_actor
from ledger.core.requests import normalise_request
from ledger.core.source_diff import Listing, SourceDecision, SourceSync, SyncJob, diff_source
from ledger.core.values import EnqueueRequest
from ledger.jobs.job_ids import random_uuids
from ledger.store.store import Store
from ledger.store.unit_of_work import UnitOfWork
from ledger.views.kinds import DEFINITIONS, JOBS

Enqueue = Callable[[Sequence[EnqueueRequest]], list[UUID | None]]
"""A batch enqueue: one result per request (a job id, or ``None`` if deduplicated)."""


def enqueue_batch(
    store: Store,
    clock: Clock,
    requests: Sequence[EnqueueRequest],
    *,
    auto_define: bool,
    new_id: Callable[[], UUID],
    actor: str | None = None,
) -> EnqueuePlan:
    """Enqueue ``requests`` in one transaction, all or none; the plan appended (one result
    per request). ``actor`` names who asked in each new job's ``job_enqueued``.

    ``new_id`` is called once per new job; the default, ``uuid4``, is replaced by ids drawn
    in bulk (:func:`ledger.jobs.job_ids.random_uuids`: time-ordered version-7 ids of the
    clock's now, a tenth of the cost)."""
    if actor is not None:
        check_actor(actor)
    normalised = [normalise_request(request) for request in requests]
    if not normalised:
        return EnqueuePlan([], [], [], [])
    if new_id is uuid4:
        enqueue_ms = int(clock.now().timestamp() * 1000)
        new_id = iter(random_uuids(len(normalised), enqueue_ms)).__next__
    with store.unit_of_work() as uow:
        if auto_define or any(r.idempotency_key or r.subject for r in normalised):
            # What decides this batch (keys, live subjects, definitions to create) must
            # not change before it commits.
            uow.serialise_appends()
        plan = plan_in(
            uow, normalised, now=clock.now(), auto_define=auto_define, new_id=new_id, actor=actor
        )
        uow.append([DEFINITIONS.changes(plan.definition_changes), JOBS.changes(plan.job_changes)])
    return plan


def plan_in(
    uow: UnitOfWork,
    normalised: Sequence[EnqueueRequest],
    *,
    now: datetime,
    auto_define: bool,
    new_id: Callable[[], UUID],
    actor: str | None,
) -> EnqueuePlan:
    """The plan of ``normalised`` requests over what ``uow`` holds (not appended: a caller
    that appends more in the same commit, a source poll, appends it with its own events).
    The caller serialises the appends first when the plan depends on the store."""
    types = sorted({r.job_type for r in normalised})
    return plan_enqueue(
        normalised,
        {t: s.definition for t, s in uow.states(DEFINITIONS, types).items()},
        stored_keys=stored_keys(uow, normalised),
        live_subjects=_live_subjects(uow, normalised),
        now=now,
        auto_define=auto_define,
        new_id=new_id,
        actor=actor,
    )


def stored_keys(
    uow: UnitOfWork, requests: Sequence[EnqueueRequest]
) -> dict[IdempotencyKey, KeyedJob]:
    """The jobs already holding the batch's idempotency keys (one lookup per distinct key)."""
    wanted = dict.fromkeys(k for k in map(idempotency_key, requests) if k is not None)
    found: dict[IdempotencyKey, KeyedJob] = {}
    for key in wanted:
        holder = uow.find_idempotent(*key)
        if holder is not None:
            found[key] = KeyedJob(holder.job_id, holder.request)
    return found


def _live_subjects(uow: UnitOfWork, requests: Sequence[EnqueueRequest]) -> dict[SubjectKey, UUID]:
    """The batch's sync subjects that already have a live job, and that job's id (one lookup
    per subject)."""
    wanted = dict.fromkeys(s for s in map(subject_key, requests) if s is not None)
    live: dict[SubjectKey, UUID] = {}
    for subject in wanted:
        job = uow.find_live_subject(*subject)
        if job is not None:
            live[subject] = job.job_id
    return live


def sync_listing(
    store: Store,
    enqueue: Enqueue,
    source_id: str,
    listing: Listing,
    *,
    job_type: str,
    org: str | None,
) -> SourceSync:
    """Diff ``listing`` against the source's sync state and ``enqueue`` the changes in one
    batch (see :meth:`ledger.api.ledger.Ledger.sources.sync` for the contract)."""
    rows = store.sync_state(source_id)  # one read: snapshot and known URIs agree
    diff = diff_source(
        source_id,
        listing,
        snapshot={row.uri: row.revision for row in rows if row.revision is not None},
        known={row.uri for row in rows},
    )
    requests = [
        EnqueueRequest(job_type=job_type, org=org, subject=decision.subject(source_id))
        for decision in diff.changes
    ]
    enqueued: list[SyncJob] = []
    skipped: list[SourceDecision] = []
    for decision, job_id in zip(diff.changes, enqueue(requests), strict=True):
        if job_id is None:
            skipped.append(decision)
        else:
            enqueued.append(SyncJob(decision, job_id))
    return SourceSync(diff, enqueued, skipped)
