"""Worker writes: the claim, and fenced writes (one job's, or a batch's, decision appended
under the row lock).

A claim leases due pending jobs in claim order, skipping rows another claim holds. Every other
worker write names a :class:`~ledger.core.state.Lease`; its decision checks the fence
(:func:`ledger.core.decide.check_fence`) against the job's locked current state. A single-job
write whose decision refuses raises the decision's :class:`~ledger.core.errors.LedgerError`; a
batch write reports it per job in :class:`~ledger.jobs.outcomes.BatchResult`. Either way nothing
is appended for that job.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from datetime import datetime
from uuid import UUID

from ledger.clock import Clock
from ledger.core import decide
from ledger.core.errors import (
    InvalidRequestError,
    JobCancelledError,
    JobNotFoundError,
    LedgerError,
)
from ledger.core.events import JobEvent
from ledger.core.requests import check_name
from ledger.core.state import JobState, Lease, fold
from ledger.core.values import JSON, HandlerStop
from ledger.jobs.claim_limits import claim_within_limits
from ledger.jobs.claim_rates import RatedClaim, within_rate
from ledger.jobs.leases import LeaseLength, all_positive, lease_for
from ledger.jobs.outcomes import BatchResult, Completion, Outcome
from ledger.store.store import Store
from ledger.store.unit_of_work import UnitOfWork
from ledger.views.kinds import JOBS

Decision = Callable[[JobState, datetime], Sequence[JobEvent] | JobEvent]
"""A command's decision bound to its arguments: (locked current state, now) -> events."""


def _as_list(events: Sequence[JobEvent] | JobEvent) -> list[JobEvent]:
    return [events] if isinstance(events, JobEvent) else list(events)


def claim(
    store: Store,
    clock: Clock,
    worker_id: str,
    *,
    limit: int,
    types: Sequence[str] | None,
    lease_s: LeaseLength,
    queues: Sequence[str] | None = None,
    starting: int = 0,
) -> list[JobState]:
    """Lease up to ``limit`` due pending jobs (of ``types`` and in ``queues``; any if
    ``None``) to ``worker_id``; their new states in claim order. The first ``starting`` of
    them also get the stage ``running`` (:func:`~ledger.core.decide.start_with_lease`): the
    caller starts their handlers at once."""
    if limit < 1:
        raise InvalidRequestError("claim needs limit >= 1 and lease lengths > 0")
    queues = checked_claim(worker_id, lease_s, queues)
    if (types is not None and not types) or (queues is not None and not queues):
        return []
    with store.unit_of_work() as uow:
        claimed = claim_due(uow, clock, types, limit, queues)
        if not claimed.due:
            return []
        leased = uow.append(
            [JOBS.changes(lease_changes(clock, claimed, worker_id, lease_s, starting))]
        )
    return [leased[state.job_id] for state in claimed.due]


def claim_due(
    uow: UnitOfWork,
    clock: Clock,
    types: Sequence[str] | None,
    limit: int,
    queues: Sequence[str] | None,
    *,
    freed: Sequence[JobState] = (),
) -> RatedClaim:
    """The due jobs a claim leases, locked, in claim order: the claim query's (which skips
    paused queues and rate keys without a token), within the concurrency limits
    (:func:`ledger.jobs.claim_limits.claim_within_limits`; ``freed``: leases this transaction
    ends, their slots free), then the rate step's (:func:`ledger.jobs.claim_rates.within_rate`:
    no more of a key than it has tokens). Limits first: a job the rate step then drops only
    leaves a slot unused, never one too many."""
    now = clock.now()
    due = claim_within_limits(uow, now, types, limit, queues, freed=freed)
    return within_rate(uow, due, now)


def checked_claim(
    worker_id: str, lease_s: LeaseLength, queues: Sequence[str] | None
) -> list[str] | None:
    """Refuse a claim's bad arguments; its queues without repeats (a name twice would claim
    its jobs twice)."""
    if not worker_id:
        raise InvalidRequestError("worker_id must be a non-empty string")
    if not all_positive(lease_s):
        raise InvalidRequestError("claim needs limit >= 1 and lease lengths > 0")
    for queue in queues or ():
        check_name(queue, "queue")
    return list(dict.fromkeys(queues)) if queues is not None else None


def lease_changes(
    clock: Clock, claimed: RatedClaim, worker_id: str, lease_s: LeaseLength, starting: int = 0
) -> list[tuple[UUID, Sequence[JobEvent]]]:
    """The lease events of the claimed jobs, each limited one spending its rate's token;
    the first ``starting`` also started (stage ``running``)."""
    # Stamp the events with a reading taken once the rows are ours: an event another
    # writer committed before we saw the row was stamped earlier than this (and the tokens,
    # counted at an earlier reading, can only have grown since).
    now = clock.now()
    rates = claimed.rates
    changes: list[tuple[UUID, Sequence[JobEvent]]] = []
    for index, s in enumerate(claimed.due):
        leased = decide.decide_lease(
            s, worker_id, lease_for(lease_s, s.job_type), now, rate=rates.get(s.job_id)
        )
        started = [decide.start_with_lease(leased)] if index < starting else []
        changes.append((s.job_id, [leased, *started]))
    return changes


def write_fenced(store: Store, clock: Clock, job_id: UUID, decision: Decision) -> JobState:
    """Lock the job, decide, append; the job's new state (unchanged if nothing was decided)."""
    with store.unit_of_work() as uow:
        state = uow.lock_jobs([job_id]).get(job_id)
        # Read the clock only once the row is locked, so one job's events are stamped
        # in the order they are appended.
        now = clock.now()
        if state is None:
            raise JobNotFoundError(f"no job {job_id}")
        events = _as_list(decision(state, now))
        if not events:
            return state
        return uow.append([JOBS.change(job_id, events)])[job_id]


def write_one_known(store: Store, clock: Clock, known: JobState, decision: Decision) -> JobState:
    """:func:`write_fenced` of ``known``'s job, decided on ``known`` first
    (:func:`write_known`): the job's new state, or the refusal raised."""
    result = write_known(store, clock, [(known.job_id, known, decision)])
    refused = result.rejected.get(known.job_id)
    if refused is not None:
        raise refused
    if result.accepted:
        [state] = result.accepted
        return state
    stored = store.get_job(known.job_id)  # nothing to append on the stored state
    if stored is None:
        raise JobNotFoundError(f"no job {known.job_id}")
    return stored


def write_fenced_many(
    store: Store, clock: Clock, items: Sequence[tuple[UUID, Decision]]
) -> BatchResult:
    """Lock every job, decide each in order, append the accepted ones in one transaction.

    A job named twice sees its earlier item's effect; a refused item is reported, not raised.
    """
    with store.unit_of_work() as uow:
        changes, rejected = decide_each(uow, clock, items)
        new_states = uow.append([JOBS.changes(changes)])
    return BatchResult(accepted=list(new_states.values()), rejected=rejected)


def start_claimed(store: Store, clock: Clock, jobs: Sequence[JobState]) -> BatchResult:
    """Record that the handlers of ``jobs`` (the states their claim returned) are about to
    start, as :func:`start_decision` would from each job's locked state; a job whose lease
    is gone is in ``rejected`` (:func:`write_known`)."""
    return write_known(store, clock, [(s.job_id, s, start_decision(_lease(s))) for s in jobs])


def start_and_finish_claimed(
    store: Store,
    clock: Clock,
    starting: Sequence[JobState],
    finished: Sequence[tuple[JobState | None, Outcome]],
    jitter: Callable[[], float],
) -> tuple[BatchResult, BatchResult]:
    """:func:`start_claimed` of ``starting`` and the outcomes ``finished`` (each with the
    state its worker last saw the job in), in one :func:`write_known`: the starts' result
    and the outcomes'."""
    items: list[tuple[UUID, JobState | None, Decision]]
    items = [(s.job_id, s, start_decision(_lease(s))) for s in starting]
    result = write_known(store, clock, items + _outcome_items(finished, jitter))
    started = {s.job_id for s in starting}
    return _part(result, started), _part(result, {o.lease.job_id for _, o in finished} - started)


def finish_claimed(
    store: Store,
    clock: Clock,
    finished: Sequence[tuple[JobState | None, Outcome]],
    jitter: Callable[[], float],
) -> BatchResult:
    """The outcomes ``finished`` (each with the state its worker last saw the job in,
    ``None``: not known) as :func:`write_known` writes them, decided as a pool's batch is
    (:func:`worker_outcome_decision`)."""
    return write_known(store, clock, _outcome_items(finished, jitter))


def _outcome_items(
    finished: Sequence[tuple[JobState | None, Outcome]], jitter: Callable[[], float]
) -> list[tuple[UUID, JobState | None, Decision]]:
    return [(o.lease.job_id, known, worker_outcome_decision(o, jitter)) for known, o in finished]


def _part(result: BatchResult, job_ids: set[UUID]) -> BatchResult:
    return BatchResult(
        accepted=[s for s in result.accepted if s.job_id in job_ids],
        rejected={j: e for j, e in result.rejected.items() if j in job_ids},
    )


def write_known(
    store: Store, clock: Clock, items: Sequence[tuple[UUID, JobState | None, Decision]]
) -> BatchResult:
    """As :func:`write_fenced_many`, for a caller that may know each job's state already
    (``None``: it does not). Each decision is taken on the state given and appended to the
    jobs still at that version without reading them first
    (:meth:`Store.append_if_unchanged`); a job that moved on since (a heartbeat, a cancel), a
    decision the given state refuses or finds nothing to append for, and a job named twice
    are decided again on the stored state, under its lock, in one more transaction."""
    now = clock.now()
    named = Counter(job_id for job_id, _, _ in items)
    known: list[tuple[JobState, Sequence[JobEvent]]] = []
    again: list[tuple[UUID, Decision]] = []
    decided: list[tuple[UUID, Decision]] = []
    for job_id, state, decision in items:
        if state is None or named[job_id] > 1:
            again.append((job_id, decision))
            continue
        try:
            events = _as_list(decision(state, now))
        except LedgerError:
            again.append((job_id, decision))  # refused on what the caller knew: ask the store
            continue
        if not events:
            again.append((job_id, decision))
            continue
        known.append((state, events))
        decided.append((job_id, decision))
    written = store.append_if_unchanged(known)
    again += [(job_id, decision) for job_id, decision in decided if job_id not in written]
    if not again:
        return BatchResult(accepted=list(written.values()), rejected={})
    rest = write_fenced_many(store, clock, again)
    return BatchResult(accepted=[*written.values(), *rest.accepted], rejected=rest.rejected)


def _lease(state: JobState) -> Lease:
    assert state.lease is not None, "only leased jobs start"
    return state.lease


def decide_each(
    uow: UnitOfWork, clock: Clock, items: Sequence[tuple[UUID, Decision]]
) -> tuple[list[tuple[UUID, Sequence[JobEvent]]], dict[UUID, LedgerError]]:
    """Lock every job of ``items`` and decide each in order: the accepted changes, and why
    each refused one was refused. A job named twice sees its earlier item's effect."""
    rejected: dict[UUID, LedgerError] = {}
    ids = [job_id for job_id, _ in items]
    current: dict[UUID, JobState] = uow.lock_jobs(ids)
    repeated = {job_id for job_id, count in Counter(ids).items() if count > 1}
    now = clock.now()
    changes: list[tuple[UUID, Sequence[JobEvent]]] = []
    for job_id, decision in items:
        state = current.get(job_id)
        if state is None:
            rejected[job_id] = JobNotFoundError(f"no job {job_id}")
            continue
        try:
            events = _as_list(decision(state, now))
        except LedgerError as error:
            rejected[job_id] = error
            continue
        if job_id in repeated:
            # A later item for the same job must see this one's effect.
            current[job_id] = fold(events, state) or state
        changes.append((job_id, events))
    return changes, rejected


def heartbeat_decision(lease: Lease, lease_s: LeaseLength) -> Decision:
    return lambda state, now: decide.decide_heartbeat(
        state, lease, lease_for(lease_s, state.job_type), now
    )


def progress_decision(
    lease: Lease,
    *,
    stage: str | None,
    done: int | None,
    total: int | None,
    checkpoint: JSON | None,
) -> Decision:
    return lambda state, now: decide.decide_progress(
        state, lease, now, stage=stage, done=done, total=total, checkpoint=checkpoint
    )


def start_decision(lease: Lease) -> Decision:
    return lambda state, now: decide.decide_start(state, lease, now)


def completion_decision(completion: Completion) -> Decision:
    return lambda state, now: decide.decide_succeed(
        state,
        completion.lease,
        now,
        output=completion.output,
        revision=completion.revision,
        content_hash=completion.content_hash,
    )


def outcome_decision(outcome: Outcome, jitter: Callable[[], float]) -> Decision:
    """A success's or a failure's decision; a failure's backoff jitter is drawn now, once."""
    if isinstance(outcome, Completion):
        return completion_decision(outcome)
    draw = jitter()
    return lambda state, now: decide.decide_fail(
        state,
        outcome.lease,
        now,
        outcome.failure,
        jitter_draw=draw,
        not_before=outcome.not_before,
    )


CANCELLED_BY_POOL_CODE = "job.cancelled"
"""The failure code of an attempt whose async handler the pool cancelled because its job was
cancelled (:mod:`ledger.runtime.executor`); its stop is recorded as ``cancelled``."""


def stop_of(outcome: Outcome) -> HandlerStop:
    """How the handler behind ``outcome`` stopped, told from the outcome it came to."""
    if isinstance(outcome, Completion):
        return HandlerStop.RETURNED
    if outcome.failure.code == CANCELLED_BY_POOL_CODE:
        return HandlerStop.CANCELLED
    return HandlerStop.RAISED


def worker_outcome_decision(outcome: Outcome, jitter: Callable[[], float]) -> Decision:
    """:func:`outcome_decision` for a pool's batch: an outcome refused because its job was
    cancelled under its lease records when and how the handler stopped
    (``job_handler_stopped``) instead of being refused."""
    decided = outcome_decision(outcome, jitter)

    def decision(state: JobState, now: datetime) -> Sequence[JobEvent] | JobEvent:
        try:
            return decided(state, now)
        except JobCancelledError:
            return decide.decide_handler_stopped(state, outcome.lease, now, stop_of(outcome))

    return decision
