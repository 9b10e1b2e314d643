"""Decision replay's report and its vocabulary: the findings, a job's and a run's results,
the mismatch a check raises, and how events are described and compared in a finding's text.

Apart from the checks (:mod:`ledger.core.replay_checks`) and the walk
(:mod:`ledger.core.decision_replay`) because the CLI and the reader consume these types without
running a replay. Pure: no store, driver or clock.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any
from uuid import UUID

import msgspec

from ledger.core.events import Event


class ReplayFinding(msgspec.Struct, frozen=True):
    """One event the current code would not have recorded the same way."""

    job_id: UUID
    """The stream's id: the job's, or a workflow run's (:mod:`ledger.core.workflow_replay`)."""
    version: int
    """The event's version in the stream (as ``jobledger history`` numbers them)."""
    topic: str
    """The event's name, or ``diagnostics``."""
    rule: str
    """A stable name for what failed, e.g. ``backoff.out_of_bounds``."""
    expected: str
    """What the current code would have produced (or refused)."""
    recorded: str
    kind: str = "job"
    """``job``, ``workflow`` for a run's stream, or ``schedule`` for a cron schedule's."""


class JobReplay(msgspec.Struct, frozen=True):
    """The result of checking one job's history, or (``kind`` ``workflow``) one run's."""

    job_id: UUID
    events: int
    findings: list[ReplayFinding]
    kind: str = "job"


class ReplaySummary(msgspec.Struct):
    """Jobs, workflow runs, schedules and events checked so far, and every finding."""

    jobs: int = 0
    events: int = 0
    findings: list[ReplayFinding] = msgspec.field(default_factory=list)
    runs: int = 0
    schedules: int = 0

    def add(self, checked: JobReplay) -> None:
        if checked.kind == "job":
            self.jobs += 1
        elif checked.kind == "schedule":
            self.schedules += 1
        else:
            self.runs += 1
        self.events += checked.events
        self.findings.extend(checked.findings)


class MismatchError(Exception):
    """Raised inside a check: the rule broken, what was expected, what was recorded."""

    def __init__(self, rule: str, expected: str, recorded: str, index: int = 0) -> None:
        super().__init__(rule)
        self.rule = rule
        self.expected = expected
        self.recorded = recorded
        self.index = index
        """Which event of the group it concerns."""


# --- describing and comparing events --------------------------------------------------------


def describe_value(value: Any) -> str:
    """A field's value as a finding shows it: ISO times, bare strings, JSON otherwise."""
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
    return " ".join([event.name, *(f"{key}={describe_value(values[key])}" for key in keys)])


def compare(expected: Sequence[Event], recorded: Sequence[Event]) -> None:
    """Raise on the first recorded event that differs from the expected one."""
    if len(expected) != len(recorded):
        raise MismatchError(
            "decision.differs",
            " + ".join(describe(e) for e in expected) or "nothing",
            " + ".join(describe(e) for e in recorded),
        )
    for index, (want, got) in enumerate(zip(expected, recorded, strict=True)):
        if want == got:
            continue
        if type(want) is not type(got):
            raise MismatchError("decision.differs", describe(want), describe(got), index)
        want_fields, got_fields = _fields(want), _fields(got)
        differing = [k for k in want_fields if want_fields[k] != got_fields[k]]
        raise MismatchError(
            "decision.differs", describe(want, differing), describe(got, differing), index
        )
