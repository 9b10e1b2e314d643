"""One poll of a source: the breaker's gate, the lister, and the diff's sync jobs appended in
the same commit as the poll's own event (:mod:`ledger.core.source_polls`).

The lister runs outside any transaction (it may take seconds: a directory walk, an S3
listing); the gate and each outcome are their own short units of work, serialised on the
appends so two polls of one source at once fold its stream in turn. Only the successful
poll's unit reads the sync state, in the same transaction that appends the jobs and the
``source_polled`` event, so the counts recorded are exactly what was enqueued.
"""

from __future__ import annotations

from collections.abc import Callable
from uuid import UUID

from ledger.clock import Clock
from ledger.core.errors import DefinitionNotFoundError, InvalidRequestError
from ledger.core.events import Event
from ledger.core.requests import normalise_request
from ledger.core.source_diff import Listing, SourceDecision, SourceSync, SyncJob, diff_source
from ledger.core.source_polls.decide import (
    SourceConfig,
    SourcePoll,
    failed_poll,
    polled,
    skip_for_breaker,
)
from ledger.core.source_polls.state import PollResult, SourcePollState
from ledger.core.values import EnqueueRequest
from ledger.jobs.enqueueing import plan_in
from ledger.store.store import Store
from ledger.views.kinds import DEFINITIONS, JOBS, SOURCE_POLLS

Lister = Callable[[], Listing]
"""A source's lister as the ledger calls it: a complete listing, or an exception."""

_REFUSED = (InvalidRequestError, DefinitionNotFoundError)
"""Ledger errors that are the source's or its configuration's fault (a URI listed twice, an
undefined sync job type): a failed poll, recorded. Any other error (the store's) propagates
and the poll records nothing."""


def poll_source(
    store: Store,
    clock: Clock,
    source: str,
    lister: Lister,
    config: SourceConfig,
    *,
    auto_define: bool,
    new_id: Callable[[], UUID],
    poll_job_id: UUID | None = None,
) -> SourcePoll:
    """Poll ``source`` once: skipped while its breaker is open, else the lister's listing
    diffed and enqueued (``source_polled``) or its failure recorded (``source_poll_failed``,
    then ``source_breaker_opened`` at the threshold)."""
    if not isinstance(source, str) or not source:
        raise InvalidRequestError("a source's name must be a non-empty string")
    if skip_for_breaker(store.state(SOURCE_POLLS, source), clock.now(), poll_job_id=poll_job_id):
        skipped = _record_skip(store, clock, source, poll_job_id)
        if skipped is not None:
            return skipped
    try:
        listing = list(lister())
    except Exception as exc:
        return _record_failure(store, clock, source, config, exc, poll_job_id=poll_job_id)
    try:
        return _record_sync(
            store,
            clock,
            source,
            listing,
            config,
            auto_define=auto_define,
            new_id=new_id,
            poll_job_id=poll_job_id,
        )
    except _REFUSED as exc:
        return _record_failure(store, clock, source, config, exc, poll_job_id=poll_job_id)


def _record_skip(
    store: Store, clock: Clock, source: str, poll_job_id: UUID | None
) -> SourcePoll | None:
    """Append the breaker's skip, decided again under the serialised appends (a poll that
    closed it meanwhile lets this one run: ``None``)."""
    with store.unit_of_work() as uow:
        uow.serialise_appends()
        state = uow.state(SOURCE_POLLS, source)
        skip = skip_for_breaker(state, clock.now(), poll_job_id=poll_job_id)
        if skip is None:
            return None
        uow.append([SOURCE_POLLS.change(source, [skip])])
        return _poll(source, PollResult.SKIPPED, None, [skip], uow.state(SOURCE_POLLS, source))


def _record_failure(
    store: Store,
    clock: Clock,
    source: str,
    config: SourceConfig,
    exc: Exception,
    *,
    poll_job_id: UUID | None,
) -> SourcePoll:
    code = str(getattr(exc, "code", "") or type(exc).__name__)
    message = getattr(exc, "message", None) or str(exc) or type(exc).__name__
    with store.unit_of_work() as uow:
        uow.serialise_appends()
        events = failed_poll(
            uow.state(SOURCE_POLLS, source),
            source,
            clock.now(),
            error=str(message),
            code=code,
            policy=config.breaker,
            poll_job_id=poll_job_id,
        )
        uow.append([SOURCE_POLLS.change(source, events)])
        return _poll(source, PollResult.FAILED, None, events, uow.state(SOURCE_POLLS, source))


def _record_sync(
    store: Store,
    clock: Clock,
    source: str,
    listing: Listing,
    config: SourceConfig,
    *,
    auto_define: bool,
    new_id: Callable[[], UUID],
    poll_job_id: UUID | None,
) -> SourcePoll:
    with store.unit_of_work() as uow:
        # The diff, the live-subject dedup and the stream's fold must not change under us.
        uow.serialise_appends()
        stored = uow.sync_state_rows(source)
        diff = diff_source(
            source,
            listing,
            snapshot={uri: rev for uri, rev in stored.items() if rev is not None},
            known=stored.keys(),
        )
        requests = [
            normalise_request(
                EnqueueRequest(job_type=config.job_type, org=config.org, subject=subject)
            )
            for subject in diff.subjects()
        ]
        now = clock.now()
        plan = plan_in(uow, requests, now=now, auto_define=auto_define, new_id=new_id, actor=None)
        enqueued: list[SyncJob] = []
        already_live: list[SourceDecision] = []
        for decision, job_id in zip(diff.changes, plan.results, strict=True):
            if job_id is None:
                already_live.append(decision)
            else:
                enqueued.append(SyncJob(decision, job_id))
        sync = SourceSync(diff, enqueued, already_live)
        event = polled(sync, now, poll_job_id=poll_job_id)
        uow.append(
            [
                DEFINITIONS.changes(plan.definition_changes),
                JOBS.changes(plan.job_changes),
                SOURCE_POLLS.change(source, [event]),
            ]
        )
        return _poll(source, PollResult.POLLED, sync, [event], uow.state(SOURCE_POLLS, source))


def _poll(
    source: str,
    result: PollResult,
    sync: SourceSync | None,
    events: list[Event],
    state: SourcePollState | None,
) -> SourcePoll:
    assert state is not None  # just appended in this unit of work
    return SourcePoll(source, result, sync, events, state)
