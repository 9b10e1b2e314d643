"""Decision replay: re-run the current decisions over a recorded history and compare.

For each recorded event (or the ``job_failed`` + outcome pair one failure command records),
:func:`check_history` infers the command from the state before it and the event itself, calls
the same pure function in :mod:`ledger.core.decide` with the recorded time, and compares what it
returns with what was recorded. Deterministic fields must be equal. The two inputs the
history does not record are bounded instead: a worker failure's jitter draw (the recorded retry
delay must lie within the policy's bounds for that attempt, or end exactly at the failure's
recorded ``not_before``, ``job_retry_scheduled`` v2), and the lengths of leases and the
reaper's fixed delay (read back from the event itself). The fold must accept every event; the
diagnostics must be computable. Pure: no store, driver or clock, so it checks an imported
history as well as a live one.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

import msgspec

from ledger.core import decide, diagnostics
from ledger.core.backoff import delay_bounds
from ledger.core.codec import Record
from ledger.core.errors import LedgerError
from ledger.core.events import (
    EnqueueRequest,
    Event,
    FailureKind,
    JobCancelled,
    JobDeadLettered,
    JobDefinition,
    JobEnqueued,
    JobEvent,
    JobFailed,
    JobHeartbeated,
    JobLeased,
    JobProgressed,
    JobReleased,
    JobRequeued,
    JobRetryScheduled,
    JobStageChanged,
    JobSucceeded,
    JobTypeDefined,
    JobTypeUpdated,
)
from ledger.core.state import IllegalTransitionError, JobState, Lease, evolve

DELAY_TOLERANCE_S = 1e-6
"""Slack on the backoff bounds: delays are floats, times are whole microseconds."""

DIAGNOSTICS_TOPIC = "diagnostics"


class ReplayFinding(msgspec.Struct, frozen=True):
    """One event the current code would not have recorded the same way."""

    job_id: UUID
    version: int
    """The event's version in the job's stream (as ``jobledger history`` numbers them)."""
    topic: str
    """The event's name, or ``diagnostics``."""
    rule: str
    """A stable name for what failed, e.g. ``backoff.out_of_bounds``."""
    expected: str
    """What the current code would have produced (or refused)."""
    recorded: str


class JobReplay(msgspec.Struct, frozen=True):
    """The result of checking one job's history."""

    job_id: UUID
    events: int
    findings: list[ReplayFinding]


class ReplaySummary(msgspec.Struct):
    """Jobs and events checked so far, and every finding."""

    jobs: int = 0
    events: int = 0
    findings: list[ReplayFinding] = msgspec.field(default_factory=list)

    def add(self, checked: JobReplay) -> None:
        self.jobs += 1
        self.events += checked.events
        self.findings.extend(checked.findings)


class _MismatchError(Exception):
    """Raised inside a check: the rule broken, what was expected, what was recorded."""

    def __init__(self, rule: str, expected: str, recorded: str, index: int = 0) -> None:
        super().__init__(rule)
        self.rule = rule
        self.expected = expected
        self.recorded = recorded
        self.index = index
        """Which event of the group it concerns."""


# --- describing events ----------------------------------------------------------------------


def _value(value: Any) -> str:
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, str):
        return value
    return msgspec.json.encode(msgspec.to_builtins(value)).decode()


def _fields(event: Event) -> dict[str, Any]:
    return {f.name: getattr(event, f.name) for f in msgspec.structs.fields(event)}


def describe(event: Event, only: Iterable[str] | None = None) -> str:
    """``name field=value …`` (all fields, or those in ``only``), for a finding's text."""
    values = _fields(event)
    keys = list(values) if only is None else [k for k in values if k in set(only)]
    return " ".join([event.name, *(f"{key}={_value(values[key])}" for key in keys)])


def _compare(expected: Sequence[JobEvent], recorded: Sequence[JobEvent]) -> None:
    """Raise on the first recorded event that differs from the expected one."""
    if len(expected) != len(recorded):
        raise _MismatchError(
            "decision.differs",
            " + ".join(describe(e) for e in expected) or "nothing",
            " + ".join(describe(e) for e in recorded),
        )
    for index, (want, got) in enumerate(zip(expected, recorded, strict=True)):
        if want == got:
            continue
        if type(want) is not type(got):
            raise _MismatchError("decision.differs", describe(want), describe(got), index)
        want_fields, got_fields = _fields(want), _fields(got)
        differing = [k for k in want_fields if want_fields[k] != got_fields[k]]
        raise _MismatchError(
            "decision.differs", describe(want, differing), describe(got, differing), index
        )


# --- definitions ----------------------------------------------------------------------------


def definitions_of(records: Iterable[Record]) -> list[tuple[datetime, JobDefinition]]:
    """A job type's definitions in stream order, each with the time it was recorded."""
    return [
        (r.event.at, r.event.definition)
        for r in records
        if isinstance(r.event, JobTypeDefined | JobTypeUpdated)
    ]


def _definition_candidates(
    definitions: Sequence[tuple[datetime, JobDefinition]], event: JobEnqueued
) -> list[JobDefinition]:
    """The definition in effect at the enqueue's time first, then any other of the version it
    names: an enqueue that does not serialise appends may read a definition committed just
    after its clock reading (PostgreSQL)."""
    in_effect = [d for at, d in definitions if at <= event.at]
    first = in_effect[-1:] if in_effect else []
    others = [
        d
        for _, d in definitions
        if d.version == event.definition_version and all(d is not f for f in first)
    ]
    return first + others


# --- per-command checks ---------------------------------------------------------------------


def _refused(error: LedgerError, recorded: Sequence[JobEvent]) -> _MismatchError:
    return _MismatchError(
        "decision.refused",
        f"refused: {error}",
        " + ".join(describe(e) for e in recorded),
    )


def _decided(
    decision: Callable[[], Sequence[JobEvent] | JobEvent], recorded: Sequence[JobEvent]
) -> list[JobEvent]:
    try:
        produced = decision()
    except LedgerError as error:
        raise _refused(error, recorded) from None
    return [produced] if isinstance(produced, JobEvent) else list(produced)


def _lease_s(event: JobLeased | JobHeartbeated) -> float:
    # The lease length is an argument of the command, not recorded: read it back.
    return (event.lease_expires_at - event.at).total_seconds()


def _check_enqueue(
    event: JobEnqueued, definitions: Sequence[tuple[datetime, JobDefinition]]
) -> None:
    try:
        request = decide.normalise_request(event.request)
    except LedgerError as error:
        raise _refused(error, [event]) from None
    candidates = _definition_candidates(definitions, event)
    if not candidates:
        raise _MismatchError(
            "decision.refused",
            f"refused: job type {event.request.job_type!r} has no definition at {event.at}",
            describe(event),
        )
    first: _MismatchError | None = None
    for definition in candidates:
        try:
            _compare(_decided(_enqueue_decision(event, request, definition), [event]), [event])
            return
        except _MismatchError as mismatch:
            first = first or mismatch
    assert first is not None
    raise first


def _enqueue_decision(
    event: JobEnqueued, request: EnqueueRequest, definition: JobDefinition
) -> Callable[[], JobEvent]:
    return lambda: decide.decide_enqueue(event.job_id, request, definition, event.at)


def _retry_expected(state: JobState, failure_kind: FailureKind) -> str:
    low, high = delay_bounds(state.backoff, state.attempt)
    why = (
        f"attempt {state.attempt} of {state.max_attempts}"
        if failure_kind.is_retryable
        else f"a {failure_kind} failure"
    )
    return f"job_retry_scheduled ({why}; delay_s in [{low:g}, {high:g}])"


def _check_worker_failure(state: JobState, failed: JobFailed, outcome: JobEvent) -> None:
    lease = Lease(state.job_id, failed.run_number, failed.attempt, failed.worker_id)
    not_before: datetime | None = None
    within_bounds = False
    if isinstance(outcome, JobRetryScheduled):
        low, high = delay_bounds(state.backoff, state.attempt)
        if outcome.next_run_at != failed.at + timedelta(seconds=outcome.delay_s):
            raise _MismatchError(
                "backoff.inconsistent",
                f"next_run_at={(failed.at + timedelta(seconds=outcome.delay_s)).isoformat()}",
                describe(outcome, ["delay_s", "next_run_at"]),
                1,
            )
        bounds = (
            f"delay_s in [{low:g}, {high:g}] for attempt {state.attempt} "
            f"(backoff {_value(state.backoff)})"
        )
        if not math.isfinite(outcome.delay_s) or outcome.delay_s < low - DELAY_TOLERANCE_S:
            raise _MismatchError(
                "backoff.out_of_bounds",
                bounds,
                describe(outcome, ["delay_s", "next_run_at"]),
                1,
            )
        not_before = outcome.not_before
        within_bounds = outcome.delay_s <= high + DELAY_TOLERANCE_S
        if not within_bounds and outcome.next_run_at != not_before:
            # Past the policy only as far as the failure's own not_before (recorded since
            # job_retry_scheduled v2; a v1 event reads as having asked for what it got).
            raise _MismatchError(
                "backoff.out_of_bounds",
                f"{bounds}, or next_run_at = the failure's not_before "
                f"({not_before.isoformat() if not_before else 'none asked'})",
                describe(outcome, ["delay_s", "next_run_at", "not_before"]),
                1,
            )
    expected = _decided(
        lambda: decide.decide_fail(
            state, lease, failed.at, failed.failure, jitter_draw=0.5, not_before=not_before
        ),
        [failed, outcome],
    )
    want = expected[1]
    if isinstance(want, JobDeadLettered) and isinstance(outcome, JobRetryScheduled):
        rule = (
            "outcome.retry_past_max_attempts"
            if failed.failure.kind.is_retryable
            else "outcome.retry_of_permanent_failure"
        )
        raise _MismatchError(
            rule,
            f"job_dead_lettered (attempt {state.attempt} of {state.max_attempts}, "
            f"failure kind {failed.failure.kind})",
            describe(outcome, ["attempt", "delay_s", "next_run_at"]),
            1,
        )
    if isinstance(want, JobRetryScheduled) and isinstance(outcome, JobDeadLettered):
        raise _MismatchError(
            "outcome.dead_letter_with_attempts_left",
            _retry_expected(state, failed.failure.kind),
            describe(outcome, ["attempt", "failure"]),
            1,
        )
    if (
        isinstance(want, JobRetryScheduled)
        and isinstance(outcome, JobRetryScheduled)
        and within_bounds
    ):
        # Within the bounds, the recorded delay is the jitter draw's: take it as given.
        expected[1] = msgspec.structs.replace(
            want, delay_s=outcome.delay_s, next_run_at=outcome.next_run_at
        )
    _compare(expected, [failed, outcome])


def _check_reap(
    state: JobState, failed: JobFailed, outcome: JobEvent, prefix: Sequence[Record]
) -> None:
    if not decide.lease_is_expired(state, failed.at):
        expires = state.lease_expires_at.isoformat() if state.lease_expires_at else "never"
        raise _MismatchError(
            "reap.lease_live",
            f"no reap: the lease runs until {expires}, not strictly before {failed.at}",
            describe(failed, ["worker_id", "failure"]),
        )
    # The reaper's delay is its configuration, not recorded apart from the event: read back.
    delay = outcome.delay_s if isinstance(outcome, JobRetryScheduled) else 0.0
    flag = bool(diagnostics.started_without_renewal_heartbeat(prefix).value)
    expected = _decided(
        lambda: decide.decide_reap(
            state, failed.at, retry_delay_s=delay, started_without_renewal_heartbeat=flag
        ),
        [failed, outcome],
    )
    want = expected[1]
    if isinstance(want, JobDeadLettered) and isinstance(outcome, JobRetryScheduled):
        raise _MismatchError(
            "outcome.retry_past_max_attempts",
            f"job_dead_lettered (attempt {state.attempt} of {state.max_attempts})",
            describe(outcome, ["attempt", "delay_s"]),
            1,
        )
    if isinstance(want, JobRetryScheduled) and isinstance(outcome, JobDeadLettered):
        raise _MismatchError(
            "outcome.dead_letter_with_attempts_left",
            f"job_retry_scheduled (attempt {state.attempt} of {state.max_attempts})",
            describe(outcome, ["attempt", "failure"]),
            1,
        )
    _compare(expected, [failed, outcome])


def _check_release(state: JobState, event: JobReleased) -> None:
    lease = Lease(state.job_id, event.run_number, event.attempt, event.worker_id)
    try:
        produced: JobEvent = decide.decide_release(state, lease, event.at, event.reason)
    except LedgerError:
        # Not a fenced release, then the boot reap's (a dead process's claim, not fenced).
        produced = _decided(
            lambda: decide.decide_release_stale(state, event.at, event.reason), [event]
        )[0]
    _compare([produced], [event])


def _live_lease(state: JobState) -> Lease:
    lease = state.lease
    assert lease is not None  # the fold accepted a worker event, so the job is leased
    return lease


def _check_single(state: JobState, event: JobEvent) -> None:
    """Check an event that one command records alone."""
    at = event.at
    decision: Callable[[], Sequence[JobEvent] | JobEvent]
    if isinstance(event, JobLeased):
        decision = lambda: decide.decide_lease(state, event.worker_id, _lease_s(event), at)  # noqa: E731
    elif isinstance(event, JobHeartbeated):
        lease = Lease(state.job_id, event.run_number, event.attempt, event.worker_id)
        decision = lambda: decide.decide_heartbeat(state, lease, _lease_s(event), at)  # noqa: E731
    elif isinstance(event, JobStageChanged):
        live = _live_lease(state)
        decision = lambda: decide.decide_progress(state, live, at, stage=event.stage)  # noqa: E731
    elif isinstance(event, JobProgressed):
        progress_lease = _live_lease(state)
        decision = lambda: decide.decide_progress(  # noqa: E731
            state,
            progress_lease,
            at,
            done=event.done,
            total=event.total,
            checkpoint=event.checkpoint,
        )
    elif isinstance(event, JobSucceeded):
        lease = Lease(state.job_id, event.run_number, event.attempt, event.worker_id)
        decision = lambda: decide.decide_succeed(  # noqa: E731
            state,
            lease,
            at,
            output=event.output,
            revision=event.revision,
            content_hash=event.content_hash,
        )
    elif isinstance(event, JobReleased):
        _check_release(state, event)
        return
    elif isinstance(event, JobCancelled):
        decision = lambda: decide.decide_cancel(state, at, event.reason)  # noqa: E731
    elif isinstance(event, JobRequeued):
        decision = lambda: decide.decide_requeue(state, at, event.reason)  # noqa: E731
    else:
        raise _MismatchError(
            "group.orphan_outcome",
            "job_failed first, in the same command",
            describe(event, ["attempt"]),
        )
    _compare(_decided(decision, [event]), [event])


# --- one history ----------------------------------------------------------------------------

_OUTCOMES = (JobRetryScheduled, JobDeadLettered)


def _group_size(records: Sequence[Record], index: int) -> int:
    """How many events one command recorded starting at ``index``: a failure and its outcome
    are one decision; everything else stands alone."""
    event = records[index].event
    if (
        isinstance(event, JobFailed)
        and index + 1 < len(records)
        and isinstance(records[index + 1].event, _OUTCOMES)
    ):
        return 2
    return 1


def check_history(
    records: Sequence[Record],
    definitions: Sequence[tuple[datetime, JobDefinition]],
) -> JobReplay:
    """Check one job's history (``Ledger.history``) against the current decisions.

    ``definitions`` is the job type's definition stream (:func:`definitions_of`). A finding is
    reported per command that the current code would not have recorded the same way; an
    illegal transition ends the check (nothing after it can be folded).
    """
    job_id = records[0].originator_id if records else UUID(int=0)
    findings: list[ReplayFinding] = []
    state: JobState | None = None
    index = 0
    while index < len(records):
        size = _group_size(records, index)
        group = records[index : index + size]
        events: list[JobEvent] = []
        after = state
        for offset, record in enumerate(group):
            try:
                if not isinstance(record.event, JobEvent):
                    raise IllegalTransitionError(f"{record.event.name} in a job's stream")
                after = evolve(after, record.event)
            except IllegalTransitionError as error:
                findings.append(
                    ReplayFinding(
                        job_id,
                        record.originator_version,
                        record.event.name,
                        "history.illegal_transition",
                        f"refused: {error}",
                        describe(record.event),
                    )
                )
                return JobReplay(job_id, index + offset + 1, findings)
            events.append(record.event)
        try:
            _check_group(state, events, records[:index], definitions)
        except _MismatchError as mismatch:
            at = group[min(mismatch.index, len(group) - 1)]
            findings.append(
                ReplayFinding(
                    job_id,
                    at.originator_version,
                    at.event.name,
                    mismatch.rule,
                    mismatch.expected,
                    mismatch.recorded,
                )
            )
        state = after
        index += size
    findings.extend(_diagnostics_findings(job_id, records))
    return JobReplay(job_id, len(records), findings)


def _check_group(
    state: JobState | None,
    events: list[JobEvent],
    prefix: Sequence[Record],
    definitions: Sequence[tuple[datetime, JobDefinition]],
) -> None:
    first = events[0]
    if isinstance(first, JobEnqueued):
        _check_enqueue(first, definitions)
        return
    assert state is not None  # the fold accepted the event, so the job exists
    if isinstance(first, JobFailed):
        if len(events) < 2:
            raise _MismatchError(
                "group.failure_without_outcome",
                "job_failed followed, in the same command, by job_retry_scheduled or "
                "job_dead_lettered",
                describe(first, ["attempt", "failure"]),
            )
        if first.failure.kind is FailureKind.LEASE_EXPIRED:
            _check_reap(state, first, events[1], prefix)
        else:
            _check_worker_failure(state, first, events[1])
        return
    _check_single(state, first)


def _diagnostics_findings(job_id: UUID, records: Sequence[Record]) -> list[ReplayFinding]:
    """A finding for each diagnostic that cannot be computed over the history."""
    last = records[-1].originator_version if records else 0
    found = []
    checks: list[Callable[[Sequence[Record]], diagnostics.Finding]] = [
        diagnostics.started_without_renewal_heartbeat,
        diagnostics.recorded_started_without_renewal_heartbeat,
        diagnostics.longest_heartbeat_gap,
        diagnostics.leases_lost,
        diagnostics.retries,
        diagnostics.time_to_first_lease,
    ]
    for check in checks:
        try:
            check(records)
        except Exception as error:  # a diagnostic that breaks on a history is the finding
            found.append(
                ReplayFinding(
                    job_id,
                    last,
                    DIAGNOSTICS_TOPIC,
                    "diagnostic.failed",
                    f"{check.__name__} computed",
                    f"{type(error).__name__}: {error}",
                )
            )
    return found
