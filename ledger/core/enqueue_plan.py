"""The batch enqueue plan: what one ``enqueue_many`` appends, decided without a database.

The shell (:mod:`ledger.jobs.enqueueing`) normalises the requests, looks up in the store what
the plan needs to know — the job types' definitions, the jobs already holding the batch's
idempotency keys, the sync subjects that already have a live job — and passes it in; the
plan walks the requests in order and returns, per request, the job id it names (or ``None``)
and the events to append. Walking in order is the contract: repeats *within* the batch obey
the same rules as repeats across batches, and the first error met is the one raised (the
whole batch is then refused, so nothing is appended).

Rules, per request:

1. an idempotency key already held (in the store, or by an earlier request of the batch) by
   the same requested fields names that job (no new job); by different fields it is an
   :class:`~ledger.core.errors.IdempotencyConflictError`;
2. a sync subject that already has a live job (in the store, or an earlier request of the
   batch) is deduplicated: the result is ``None``, nothing is appended, and ``skipped_by``
   names that live job;
3. otherwise a new job: its id from ``new_id``, its event from
   :func:`ledger.core.decide.decide_enqueue` (an unknown or disabled job type raises
   :class:`~ledger.core.errors.DefinitionNotFoundError`).

With ``auto_define`` every job type of the batch that has no definition is defined with the
defaults first (even when all its requests turn out to be repeats), as enqueue always did.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import NamedTuple
from uuid import UUID

import msgspec

from ledger.core import decide
from ledger.core.errors import IdempotencyConflictError
from ledger.core.events import Event, JobEvent, JobTypeDefined
from ledger.core.requests import same_request
from ledger.core.values import EnqueueRequest, JobDefinition

IdempotencyKey = tuple[str, str, str]
"""``(job_type, org or "", key)``: the namespace an idempotency key is unique in."""

SubjectKey = tuple[str, str]
"""``(source_id, uri)``: a sync subject, of which at most one job is live."""


class KeyedJob(NamedTuple):
    """The job holding an idempotency key, and what it was asked to do."""

    job_id: UUID
    request: EnqueueRequest


class EnqueuePlan(msgspec.Struct, frozen=True):
    """What a batch enqueue appends: the shape of :meth:`UnitOfWork.append`'s arguments."""

    results: list[UUID | None]
    """One per request, in order: the new or existing job id, or ``None`` (deduplicated)."""
    created: list[bool]
    """One per request, in order: whether it made a new job (``False``: an idempotent
    repeat named an existing one, or a live subject deduplicated it)."""
    job_changes: list[tuple[UUID, Sequence[JobEvent]]]
    definition_changes: list[tuple[str, Sequence[Event]]]
    skipped_by: list[UUID | None] = msgspec.field(default_factory=list)
    """One per request, in order (empty for an empty batch): for a request deduplicated by a
    live sync subject, that subject's live job (what the caller can wait on instead)."""


def idempotency_key(request: EnqueueRequest) -> IdempotencyKey | None:
    """The namespace-qualified key of a request, or ``None`` if it has none."""
    if request.idempotency_key is None:
        return None
    return (request.job_type, request.org or "", request.idempotency_key)


def subject_key(request: EnqueueRequest) -> SubjectKey | None:
    """The sync subject a request works on, or ``None`` if it has none."""
    if request.subject is None:
        return None
    return (request.subject.source_id, request.subject.uri)


def plan_enqueue(
    requests: Sequence[EnqueueRequest],
    definitions: Mapping[str, JobDefinition],
    *,
    stored_keys: Mapping[IdempotencyKey, KeyedJob],
    live_subjects: Mapping[SubjectKey, UUID],
    now: datetime,
    auto_define: bool,
    new_id: Callable[[], UUID],
    actor: str | None = None,
) -> EnqueuePlan:
    """Plan a batch of *normalised* requests (see the module docstring for the rules).

    ``definitions``: the current definitions of the batch's job types (missing: undefined);
    ``stored_keys`` / ``live_subjects``: what the store holds for the batch's keys and
    subjects (a live subject's job id), looked up in the same transaction before planning.
    ``new_id`` is called once per new job, in request order; ``actor`` (checked by the
    caller) is recorded in each new job's ``job_enqueued``. Raises the typed error of the
    first request that is refused.
    """
    known = dict(definitions)
    definition_changes: list[tuple[str, Sequence[Event]]] = []
    if auto_define:
        for job_type in sorted({r.job_type for r in requests}):
            if job_type not in known:
                known[job_type] = JobDefinition(job_type=job_type)
                definition_changes.append(
                    (job_type, [JobTypeDefined(at=now, definition=known[job_type])])
                )
    keyed = dict(stored_keys)
    live = dict(live_subjects)
    results: list[UUID | None] = []
    created: list[bool] = []
    skipped_by: list[UUID | None] = []
    job_changes: list[tuple[UUID, Sequence[JobEvent]]] = []
    for request in requests:
        key = idempotency_key(request)
        holder = keyed.get(key) if key is not None else None
        if holder is not None:
            if not same_request(holder.request, request):
                raise IdempotencyConflictError(
                    f"idempotency key {request.idempotency_key!r} already names job "
                    f"{holder.job_id} with different requested fields",
                    holder.job_id,
                )
            results.append(holder.job_id)
            created.append(False)
            skipped_by.append(None)
            continue
        subject = subject_key(request)
        job_id_of_live = live.get(subject) if subject is not None else None
        if job_id_of_live is not None:
            results.append(None)
            created.append(False)
            skipped_by.append(job_id_of_live)
            continue
        job_id = new_id()
        if subject is not None:
            live[subject] = job_id
        event = decide.decide_enqueue(job_id, request, known.get(request.job_type), now, actor)
        if key is not None:
            keyed[key] = KeyedJob(job_id, request)
        job_changes.append((job_id, [event]))
        results.append(job_id)
        created.append(True)
        skipped_by.append(None)
    return EnqueuePlan(results, created, job_changes, definition_changes, skipped_by)
