"""A job's history laid out as a drawing: a time axis, one lane per execution (each
``job_leased`` opens one; the job's own events — enqueue, requeue, a cancel while pending —
sit on the top lane), one mark per event, each lease window as a bar up to its expiry, the
spans no lease covered while the job was leased as gaps, and the diagnostics on it.

Pure: records and findings in, a :class:`TimelineDrawing` of plain coordinates out; the SVG
text is the template's (``templates/fragments/job_timeline.svg``). Time runs linearly from
the first event to the last (or to ``now`` while a lease is held), so a long backoff is as
long on the page as it was."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import NamedTuple

from ledger.core.codec import Record
from ledger.core.diagnostics import Finding
from ledger.core.events import (
    JobCancelled,
    JobDeadLettered,
    JobEvent,
    JobFailed,
    JobHeartbeated,
    JobLeased,
    JobReapDeferred,
    JobReleased,
    JobRetryScheduled,
    JobSucceeded,
)
from ledger.core.values import FailureKind

WIDTH = 960.0
LEFT = 150.0
"""Room for the lanes' labels."""
RIGHT = 24.0
TOP = 16.0
LANE_HEIGHT = 40.0
AXIS_HEIGHT = 34.0
TICKS = 6

KINDS = {
    "job_enqueued": "enqueue",
    "job_leased": "lease",
    "job_heartbeated": "heartbeat",
    "job_stage_changed": "stage",
    "job_progressed": "progress",
    "job_succeeded": "success",
    "job_failed": "failure",
    "job_retry_scheduled": "retry",
    "job_dead_lettered": "dead",
    "job_reap_deferred": "defer",
    "job_released": "release",
    "job_cancelled": "cancel",
    "job_handler_stopped": "cancel",
    "job_requeued": "requeue",
}
"""Each event's mark kind (its CSS class); a failure the reaper recorded is ``reap``."""

_ENDS = (JobFailed, JobSucceeded, JobReleased, JobCancelled)
_RENEWALS = (JobLeased, JobHeartbeated, JobReapDeferred)
_NOT_FLAGGED = {"time_to_first_lease_s", "longest_heartbeat_gap_s"}
"""Findings that are measures, not problems (the longest gap is drawn as a bracket)."""


class Lane(NamedTuple):
    y: float
    label: str


class Mark(NamedTuple):
    version: int
    event: str
    kind: str
    at: datetime
    x: float
    y: float
    flags: tuple[str, ...]
    """The diagnostics whose evidence this event is (drawn as a ring)."""


class Bar(NamedTuple):
    """A span a lease covered, ending at its expiry or at the event that ended the lease."""

    x1: float
    x2: float
    y: float
    start: datetime
    until: datetime


class Gap(NamedTuple):
    """A span of a leased execution no lease covered: expired, and reaped or renewed late
    (or, at ``now``, not yet)."""

    x1: float
    x2: float
    y: float
    start: datetime
    until: datetime
    label: str


class Bracket(NamedTuple):
    """A diagnostic spanning two events (the longest silence between renewals)."""

    x1: float
    x2: float
    y: float
    label: str


class Tick(NamedTuple):
    x: float
    label: str


class TimelineDrawing(NamedTuple):
    width: float
    height: float
    left: float
    axis_y: float
    ticks: list[Tick]
    lanes: list[Lane]
    bars: list[Bar]
    gaps: list[Gap]
    brackets: list[Bracket]
    marks: list[Mark]


class _Execution:
    """One lease's events as they are assigned to its lane."""

    def __init__(self, lane: int, leased: JobLeased) -> None:
        self.lane = lane
        self.key = (leased.run_number, leased.attempt)
        self.renewals: list[tuple[datetime, datetime]] = []
        self.ended: datetime | None = None


def _kind(event: JobEvent) -> str:
    if isinstance(event, JobFailed) and event.failure.kind is FailureKind.LEASE_EXPIRED:
        return "reap"
    return KINDS.get(event.name, "other")


def _flags(findings: Sequence[Finding]) -> dict[int, tuple[str, ...]]:
    flagged: dict[int, tuple[str, ...]] = {}
    for finding in findings:
        if finding.name in _NOT_FLAGGED or not finding.value:
            continue
        for version in finding.evidence:
            flagged[version] = (*flagged.get(version, ()), finding.name)
    return flagged


def _assign_lanes(events: Sequence[tuple[int, JobEvent]]) -> tuple[list[int], list[_Execution]]:
    """Each event's lane index (0: the job's own lane) and the executions, oldest first."""
    executions: list[_Execution] = []
    open_execution: _Execution | None = None
    lanes = []
    for _, event in events:
        if isinstance(event, JobLeased):
            open_execution = _Execution(len(executions) + 1, event)
            executions.append(open_execution)
        key = (getattr(event, "run_number", None), getattr(event, "attempt", None))
        belongs = open_execution is not None and (
            key == open_execution.key or isinstance(event, JobCancelled)
        )
        if not belongs:
            # a retry or dead letter follows the failure that closed its execution
            belongs_late = (
                isinstance(event, JobRetryScheduled | JobDeadLettered)
                and executions
                and key == executions[-1].key
            )
            lanes.append(executions[-1].lane if belongs_late else 0)
            continue
        assert open_execution is not None
        lanes.append(open_execution.lane)
        if isinstance(event, _RENEWALS):
            open_execution.renewals.append((event.at, event.lease_expires_at))
        if isinstance(event, _ENDS):
            open_execution.ended = event.at
            open_execution = None
    return lanes, executions


def _covered(execution: _Execution, end: datetime) -> list[tuple[datetime, datetime]]:
    """The union of the execution's lease windows, each cut at the execution's end."""
    spans: list[tuple[datetime, datetime]] = []
    for start, expiry in sorted(execution.renewals):
        until = min(expiry, end)
        if until <= start and spans:
            continue
        if spans and start <= spans[-1][1]:
            spans[-1] = (spans[-1][0], max(spans[-1][1], until))
        else:
            spans.append((start, max(until, start)))
    return spans


def _uncovered(
    spans: list[tuple[datetime, datetime]], end: datetime
) -> list[tuple[datetime, datetime]]:
    """Where the execution had no lease between its claim and ``end``."""
    holes = [(a[1], b[0]) for a, b in itertools.pairwise(spans) if b[0] > a[1]]
    if spans and end > spans[-1][1]:
        holes.append((spans[-1][1], end))
    return holes


def _tick_label(moment: datetime, span: timedelta) -> str:
    if span < timedelta(seconds=10):
        return moment.strftime("%H:%M:%S.%f")[:-3]
    if span < timedelta(days=1):
        return moment.strftime("%H:%M:%S")
    return moment.strftime("%m-%d %H:%M")


def layout(
    records: Sequence[Record], findings: Sequence[Finding], now: datetime | None = None
) -> TimelineDrawing:
    """Lay out one job's history (``Reader.history``), its diagnostics marked on it; ``now``
    extends a lease still held to the present, so a lease expired and not yet reaped shows."""
    events = [(r.originator_version, r.event) for r in records if isinstance(r.event, JobEvent)]
    lane_of, executions = _assign_lanes(events)
    lanes_total = len(executions) + 1
    height = TOP + lanes_total * LANE_HEIGHT + AXIS_HEIGHT
    if not events:
        return TimelineDrawing(WIDTH, height, LEFT, height - AXIS_HEIGHT, [], [], [], [], [], [])
    start = events[0][1].at
    end = max(event.at for _, event in events)
    live = [e for e in executions if e.ended is None]
    if live and now is not None and now > end:
        end = now
    for execution in executions:
        if execution.ended is None and execution.renewals:
            end = max(end, *(expiry for _, expiry in execution.renewals))
    span = max(end - start, timedelta(milliseconds=1))
    plot = WIDTH - LEFT - RIGHT

    def x_of(moment: datetime) -> float:
        return round(LEFT + plot * ((moment - start) / span), 2)

    def y_of(lane: int) -> float:
        return TOP + lane * LANE_HEIGHT + LANE_HEIGHT / 2

    lanes = [Lane(y_of(0), "job")] + [
        Lane(y_of(e.lane), f"run {e.key[0]} · attempt {e.key[1]}") for e in executions
    ]
    bars: list[Bar] = []
    gaps: list[Gap] = []
    for execution in executions:
        closed = execution.ended or end
        spans = _covered(execution, closed)
        y = y_of(execution.lane)
        bars += [Bar(x_of(a), x_of(b), y, a, b) for a, b in spans]
        for a, b in _uncovered(spans, closed):
            how = "no lease until the next event" if execution.ended else "expired, not reaped"
            gaps.append(Gap(x_of(a), x_of(b), y, a, b, f"lease expired at {a.isoformat()}: {how}"))
    flags = _flags(findings)
    marks = [
        Mark(
            version,
            event.name,
            _kind(event),
            event.at,
            x_of(event.at),
            y_of(lane),
            flags.get(version, ()),
        )
        for (version, event), lane in zip(events, lane_of, strict=True)
    ]
    marks = _unstacked(marks)
    brackets = _brackets(findings, {m.version: m for m in marks})
    axis_y = height - AXIS_HEIGHT
    ticks = [
        Tick(x_of(start + span * i / TICKS), _tick_label(start + span * i / TICKS, span))
        for i in range(TICKS + 1)
    ]
    return TimelineDrawing(WIDTH, height, LEFT, axis_y, ticks, lanes, bars, gaps, brackets, marks)


MARK_SPACING = 9.0
"""Marks on one lane closer than this (a failure and its outcome share a moment) are
stacked downwards, so each stays visible and clickable."""


def _unstacked(marks: list[Mark]) -> list[Mark]:
    placed: list[Mark] = []
    depth: dict[float, tuple[float, int]] = {}  # lane y -> (last x, marks stacked there)
    for mark in marks:
        last = depth.get(mark.y)
        stacked = last[1] + 1 if last is not None and mark.x - last[0] < MARK_SPACING else 0
        depth[mark.y] = (mark.x if stacked == 0 else last[0] if last else mark.x, stacked)
        placed.append(mark._replace(y=mark.y + stacked * 7) if stacked else mark)
    return placed


def _brackets(findings: Sequence[Finding], marks: dict[int, Mark]) -> list[Bracket]:
    """The longest silence between renewals, over its two events (when it has two)."""
    found = []
    for finding in findings:
        if finding.name != "longest_heartbeat_gap_s" or len(finding.evidence) != 2:
            continue
        first, last = (marks.get(v) for v in finding.evidence)
        if first is None or last is None or last.x <= first.x:
            continue
        found.append(
            Bracket(first.x, last.x, first.y - 14, f"longest silence {finding.value:.3g}s")
        )
    return found
