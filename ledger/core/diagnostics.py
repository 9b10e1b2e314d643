"""Diagnostics derived from a job's event history — pure functions, no store, no clock.

Each diagnostic names the events (by stream version) it was derived from, so an operator can
check the reasoning in ``jobledger history``. The reaper records
``started_without_renewal_heartbeat`` in the events it appends; the rest serve debugging
(``jobledger diagnose``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime, timedelta

import msgspec

from ledger.core.codec import Record
from ledger.core.events import (
    JobCancelled,
    JobEnqueued,
    JobEvent,
    JobFailed,
    JobHeartbeated,
    JobLeased,
    JobReapDeferred,
    JobReleased,
    JobRetryScheduled,
    JobStageChanged,
    JobSucceeded,
)
from ledger.core.state import JobState, fold
from ledger.core.values import FailureKind, JobStatus, Stage

# Events that end an attempt (the failure, success, release or cancel that closes it).
_ATTEMPT_ENDS = (JobFailed, JobSucceeded, JobReleased, JobCancelled)


class Finding(msgspec.Struct, frozen=True):
    """One diagnostic: its value, a sentence saying what it means, the events behind it."""

    name: str
    value: bool | int | float | None
    explanation: str
    evidence: list[int]


def _job_events(records: Sequence[Record]) -> list[tuple[int, JobEvent]]:
    return [
        (record.originator_version, record.event)
        for record in records
        if isinstance(record.event, JobEvent)
    ]


def _attempt_events(
    events: list[tuple[int, JobEvent]], run_number: int, attempt: int
) -> list[tuple[int, JobEvent]]:
    """The events of one execution: from its job_leased to the end of the history."""
    start = None
    for index, (_, event) in enumerate(events):
        if isinstance(event, JobLeased) and (event.run_number, event.attempt) == (
            run_number,
            attempt,
        ):
            start = index
    return [] if start is None else events[start:]


def started_without_renewal_heartbeat(records: Sequence[Record]) -> Finding:
    """True when the current attempt started running and no heartbeat came strictly after.

    False unless the job's stage is ``running``; the start is the attempt's first
    ``job_stage_changed`` to running; a heartbeat stamped at the very same time as the start
    is not a renewal.
    """
    name = "started_without_renewal_heartbeat"
    events = _job_events(records)
    state = fold(event for _, event in events)
    if state is None or state.stage != Stage.RUNNING:
        stage = state.stage if state else "none"
        return Finding(name, False, f"the job's stage is {stage}, not running", [])
    current = _attempt_events(events, state.run_number, state.attempt)
    started = next(
        (
            (version, event)
            for version, event in current
            if isinstance(event, JobStageChanged) and event.stage == Stage.RUNNING
        ),
        None,
    )
    if started is None:
        return Finding(name, False, "the attempt never recorded a start of running", [])
    start_version, start_event = started
    renewals = [
        version
        for version, event in current
        if isinstance(event, JobHeartbeated) and event.at > start_event.at
    ]
    if renewals:
        return Finding(
            name,
            False,
            f"{len(renewals)} heartbeat(s) renewed the lease after running started",
            [start_version, *renewals],
        )
    return Finding(
        name,
        True,
        "running started and no heartbeat came after it: the worker likely died or hung "
        "right after starting",
        [start_version],
    )


class _Execution(msgspec.Struct, frozen=True):
    """One lease of the job: its ``job_leased``, its renewals, and how it ended."""

    run_number: int
    attempt: int
    lease_s: float
    renewals: list[tuple[int, datetime]]
    """(stream version, time) of the claim and of each heartbeat, in order."""
    ended: tuple[int, JobEvent] | None
    """The event that ended it (failure, success, release, cancel); ``None``: still leased."""


def _executions(events: list[tuple[int, JobEvent]]) -> list[_Execution]:
    """Every lease in the history, oldest first (a released attempt's number comes back, so
    executions are told apart by their ``job_leased``, not by their attempt)."""
    found: list[_Execution] = []
    for index, (version, event) in enumerate(events):
        if not isinstance(event, JobLeased):
            continue
        renewals = [(version, event.at)]
        ended = None
        for later_version, later in events[index + 1 :]:
            if isinstance(later, JobHeartbeated):
                renewals.append((later_version, later.at))
            elif isinstance(later, _ATTEMPT_ENDS):
                ended = (later_version, later)
                break
        lease_s = _lease_length(event).total_seconds()
        found.append(_Execution(event.run_number, event.attempt, lease_s, renewals, ended))
    return found


def _silences(
    execution: _Execution, now: datetime | None
) -> list[tuple[timedelta, list[int], str]]:
    """The execution's silences: between renewals, then from the last renewal to the event
    that ended it, or (still leased) to ``now``. Each with its evidence and how it closed."""
    # (version of the closing event, or None for now; its time; how the silence closed)
    closes: list[tuple[int | None, datetime, str]] = [
        (version, at, "renewed") for version, at in execution.renewals[1:]
    ]
    last_at = execution.renewals[-1][1]
    if execution.ended is not None:
        version, event = execution.ended
        if event.at >= last_at:
            closes.append((version, event.at, f"ended by {event.name}"))
    elif now is not None and now >= last_at:
        closes.append((None, now, "still leased"))
    silences = []
    for (opened, opened_at), (closed, closed_at, how) in zip(
        execution.renewals, closes, strict=False
    ):
        evidence = [opened] if closed is None else [opened, closed]
        silences.append((closed_at - opened_at, evidence, how))
    return silences


def longest_heartbeat_gap(records: Sequence[Record], now: datetime | None = None) -> Finding:
    """The longest silence between lease renewals in any execution of the job, against that
    execution's lease length.

    Every lease counts, not only the current attempt's: a hung execution that a restarted
    pool's boot reap released (its attempt number comes back) or that the reaper failed is the
    silence an operator is looking for, even once a quick rerun has succeeded. The claim is
    the first renewal; the silence up to the event that ended an execution counts, and so,
    with ``now``, does a live execution's silence up to ``now``. Of equal gaps, the latest.
    """
    name = "longest_heartbeat_gap_s"
    executions = _executions(_job_events(records))
    if not executions:
        return Finding(name, None, "the job was never leased", [])
    longest: tuple[timedelta, list[int], str, _Execution] | None = None
    for execution in executions:
        for gap, evidence, how in _silences(execution, now):
            if longest is None or gap >= longest[0]:
                longest = (gap, evidence, how, execution)
    if longest is None:
        first = executions[0].renewals[0][0]
        return Finding(name, 0.0, "only the claim so far; no gap to measure", [first])
    gap, evidence, how, execution = longest
    ratio = gap.total_seconds() / execution.lease_s if execution.lease_s else 0.0
    return Finding(
        name,
        gap.total_seconds(),
        f"longest silence {gap.total_seconds():g}s = {ratio:.2f} of the "
        f"{execution.lease_s:g}s lease (run {execution.run_number} attempt "
        f"{execution.attempt}, {how})",
        evidence,
    )


def _lease_length(event: JobEvent) -> timedelta:
    assert isinstance(event, JobLeased | JobHeartbeated)
    return event.lease_expires_at - event.at


def recorded_started_without_renewal_heartbeat(records: Sequence[Record]) -> Finding:
    """What the reaper recorded for the flag when it last failed this job's lease (the live
    diagnostic above reads the *current* attempt, which may have moved on since)."""
    name = "recorded_started_without_renewal_heartbeat"
    for version, event in reversed(_job_events(records)):
        if isinstance(event, JobFailed) and event.started_without_renewal_heartbeat is not None:
            return Finding(
                name,
                event.started_without_renewal_heartbeat,
                f"recorded by the {_reaper_of(event)} when it failed attempt {event.attempt}",
                [version],
            )
    return Finding(name, None, "the reaper never failed this job's lease", [])


def _reaper_of(failed: JobFailed) -> str:
    """Who recorded a failure's flag: the boot reap (a lost worker) or the reaper."""
    return "boot reap" if failed.failure.kind is FailureKind.WORKER_LOST else "reaper"


def leases_lost(records: Sequence[Record]) -> Finding:
    """How many attempts ended because their lease expired (the worker vanished or hung)."""
    lost = [
        version
        for version, event in _job_events(records)
        if isinstance(event, JobFailed) and event.failure.kind is FailureKind.LEASE_EXPIRED
    ]
    return Finding(
        "leases_lost", len(lost), f"{len(lost)} attempt(s) lost their lease to the reaper", lost
    )


def workers_lost(records: Sequence[Record]) -> Finding:
    """How many times the job's process died while its handler ran (the boot reap's
    ``worker_lost`` failures): a job that keeps taking its worker down shows here, where
    ``leases_lost`` (the reaper's) stays 0."""
    lost = [
        (version, event)
        for version, event in _job_events(records)
        if isinstance(event, JobFailed) and event.failure.kind is FailureKind.WORKER_LOST
    ]
    if not lost:
        return Finding("workers_lost", 0, "no worker died while this job's handler ran", [])
    state = current_state(records)
    ended = ""
    last = state.last_error if state is not None else None
    if state is not None and state.status is JobStatus.DEAD and last is not None:
        ended = f"; dead after attempt {state.attempt} of {state.max_attempts} ({last.code})"
    times = "once" if len(lost) == 1 else f"{len(lost)} times"
    return Finding(
        "workers_lost",
        len(lost),
        f"took its worker down {times}: the process died while the handler ran "
        f"(attempts {', '.join(str(e.attempt) for _, e in lost)}){ended}",
        [version for version, _ in lost],
    )


def reap_deferrals(records: Sequence[Record]) -> Finding:
    """How many times a reaper could not reap this job's expired lease and pushed it out
    instead (``job_reap_deferred``), and the latest error that stopped it."""
    deferred = [
        (version, event)
        for version, event in _job_events(records)
        if isinstance(event, JobReapDeferred)
    ]
    if not deferred:
        return Finding("reap_deferrals", 0, "no reap of this job was deferred", [])
    latest = deferred[-1][1]
    assert isinstance(latest, JobReapDeferred)
    cause = latest.cause
    sqlstate = f", sqlstate {cause.sqlstate}" if cause.sqlstate else ""
    first_line = cause.message.splitlines()[0] if cause.message else ""
    return Finding(
        "reap_deferrals",
        len(deferred),
        f"{len(deferred)} reap(s) deferred, the lease pushed out each time; the latest by "
        f"{cause.code}{sqlstate}: {first_line}",
        [version for version, _ in deferred],
    )


def retries(records: Sequence[Record]) -> Finding:
    """How many retries were scheduled and how long they were set to wait in total."""
    scheduled = [
        (version, event)
        for version, event in _job_events(records)
        if isinstance(event, JobRetryScheduled)
    ]
    waited = sum(event.delay_s for _, event in scheduled)
    return Finding(
        "retries",
        len(scheduled),
        f"{len(scheduled)} retr{'y' if len(scheduled) == 1 else 'ies'}, "
        f"{waited:g}s of backoff in total",
        [version for version, _ in scheduled],
    )


def time_to_first_lease(records: Sequence[Record]) -> Finding:
    """Seconds from enqueue to the first claim (queueing delay), or None if never claimed."""
    events = _job_events(records)
    enqueued = next(((v, e) for v, e in events if isinstance(e, JobEnqueued)), None)
    leased = next(((v, e) for v, e in events if isinstance(e, JobLeased)), None)
    if enqueued is None or leased is None:
        return Finding("time_to_first_lease_s", None, "the job was never claimed", [])
    waited = (leased[1].at - enqueued[1].at).total_seconds()
    return Finding(
        "time_to_first_lease_s",
        waited,
        f"claimed {waited:g}s after it was enqueued",
        [enqueued[0], leased[0]],
    )


FROM_HISTORY: tuple[Callable[[Sequence[Record]], Finding], ...] = (
    started_without_renewal_heartbeat,
    recorded_started_without_renewal_heartbeat,
    longest_heartbeat_gap,
    leases_lost,
    workers_lost,
    reap_deferrals,
    retries,
    time_to_first_lease,
)
"""Every diagnostic, in report order (``longest_heartbeat_gap`` also takes ``now``): what
:func:`diagnose` reports and what decision replay checks can be computed over a history."""


def diagnose(records: Sequence[Record], now: datetime | None = None) -> list[Finding]:
    """Every diagnostic of one job's history; ``now`` measures a live lease's silence."""
    return [
        longest_heartbeat_gap(records, now) if check is longest_heartbeat_gap else check(records)
        for check in FROM_HISTORY
    ]


def current_state(records: Sequence[Record]) -> JobState | None:
    return fold(event for _, event in _job_events(records))
