"""Decision replay: re-run the current decisions over a recorded history and compare.

For each recorded event (or the ``job_failed`` + outcome pair one failure command records),
:func:`check_history` infers the command from the state before it and the event itself, calls
the same pure function in :mod:`ledger.core.decide` with the recorded time, and compares what it
returns with what was recorded. Deterministic fields must be equal. The fold must accept every
event; the diagnostics must be computable. Pure: no store, driver or clock, so it checks an
imported history as well as a live one.

This module holds the walk over one history (grouping, folding, collecting findings); the
per-command checks are :mod:`ledger.core.replay_checks`, the report types and event
comparison :mod:`ledger.core.replay_findings`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from uuid import UUID

from ledger.core import diagnostics
from ledger.core.codec import Record
from ledger.core.events import (
    JobDeadLettered,
    JobEvent,
    JobFailed,
    JobRetryScheduled,
    JobTypeDefined,
    JobTypeUpdated,
)
from ledger.core.replay_checks import check_group
from ledger.core.replay_findings import JobReplay, MismatchError, ReplayFinding, describe
from ledger.core.state import IllegalTransitionError, JobState, evolve
from ledger.core.values import JobDefinition

DIAGNOSTICS_TOPIC = "diagnostics"


# --- definitions ----------------------------------------------------------------------------


def definitions_of(records: Iterable[Record]) -> list[tuple[datetime, JobDefinition]]:
    """A job type's definitions in stream order, each with the time it was recorded."""
    return [
        (r.event.at, r.event.definition)
        for r in records
        if isinstance(r.event, JobTypeDefined | JobTypeUpdated)
    ]


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
            check_group(state, events, records[:index], definitions)
        except MismatchError as mismatch:
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


def _diagnostics_findings(job_id: UUID, records: Sequence[Record]) -> list[ReplayFinding]:
    """A finding for each diagnostic that cannot be computed over the history."""
    last = records[-1].originator_version if records else 0
    found = []
    for check in diagnostics.FROM_HISTORY:
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
