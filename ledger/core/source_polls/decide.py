"""What a poll appends, decided from the source's fold: skip it while the breaker is open,
record a failure (and open the breaker at the threshold), or record the successful diff.
Pure: the caller passes ``now`` and what the lister did."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from uuid import UUID

import msgspec

from ledger.core.events import Event
from ledger.core.source_diff import SourceSync
from ledger.core.source_polls.events import (
    SourceBreakerOpened,
    SourcePolled,
    SourcePollFailed,
    SourcePollSkipped,
)
from ledger.core.source_polls.state import BreakerState, PollResult, SourcePollState

BREAKER_OPEN = "source.breaker_open"
"""The skip code of a poll the open breaker stopped."""
DEFAULT_THRESHOLD = 3
DEFAULT_COOLDOWN_S = 300.0
ERROR_CHARS = 500
"""An error longer than this is cut (the event keeps its first line only, too)."""


POLL_JOB_MAX_ATTEMPTS = 3
"""The poll job type's attempts: a poll job fails only when the store did (a lister's
failure is the poll's result, recorded in the source's stream, not the job's)."""
POLL_JOB_TIMEOUT_S = 300.0


@dataclass(frozen=True)
class BreakerPolicy:
    """When a source's breaker opens (``threshold`` consecutive failed polls) and how long
    it stays open (``cooldown_s``)."""

    threshold: int = DEFAULT_THRESHOLD
    cooldown_s: float = DEFAULT_COOLDOWN_S

    def __post_init__(self) -> None:
        if self.threshold < 1 or self.cooldown_s < 0:
            raise ValueError("a source breaker needs threshold >= 1 and cooldown_s >= 0")


@dataclass(frozen=True)
class SourceConfig:
    """How a source is synced: the job type (and org) of the sync jobs its polls enqueue,
    and its breaker."""

    job_type: str
    org: str | None = None
    breaker: BreakerPolicy = BreakerPolicy()


class SourcePoll(msgspec.Struct, frozen=True):
    """What one poll did: how it ended, the sync it enqueued (a successful poll only), the
    events it appended, and the source's poll state after them."""

    source: str
    result: PollResult
    sync: SourceSync | None
    events: list[Event]
    state: SourcePollState


def skip_for_breaker(
    state: SourcePollState | None, now: datetime, *, poll_job_id: UUID | None
) -> SourcePollSkipped | None:
    """The skip a poll at ``now`` records, or ``None`` if it may run (a closed or half-open
    breaker)."""
    if state is None or state.breaker(now) is not BreakerState.OPEN:
        return None
    assert state.breaker_until is not None
    return SourcePollSkipped(
        at=now,
        source=state.source,
        reason=(
            f"breaker open after {state.failures} consecutive failed polls "
            f"(last: {state.last_error}) until {state.breaker_until.isoformat()}"
        ),
        code=BREAKER_OPEN,
        until=state.breaker_until,
        poll_job_id=poll_job_id,
    )


def failed_poll(
    state: SourcePollState | None,
    source: str,
    now: datetime,
    *,
    error: str,
    code: str,
    policy: BreakerPolicy,
    poll_job_id: UUID | None,
) -> list[Event]:
    """A failed poll's events: ``source_poll_failed``, then ``source_breaker_opened`` once
    the consecutive failures reach the threshold (again at once after a cool-down: the count
    is still at or past it)."""
    failures = (0 if state is None else state.failures) + 1
    first_line = (error.strip().splitlines() or [""])[0][:ERROR_CHARS] or code
    events: list[Event] = [
        SourcePollFailed(
            at=now,
            source=source,
            error=first_line,
            code=code,
            failures=failures,
            poll_job_id=poll_job_id,
        )
    ]
    if failures >= policy.threshold:
        events.append(
            SourceBreakerOpened(
                at=now,
                source=source,
                failures=failures,
                threshold=policy.threshold,
                cooldown_s=policy.cooldown_s,
                until=now + timedelta(seconds=policy.cooldown_s),
            )
        )
    return events


def polled(sync: SourceSync, now: datetime, *, poll_job_id: UUID | None) -> SourcePolled:
    """A successful poll's event, from what its sync did."""
    diff = sync.diff
    return SourcePolled(
        at=now,
        source=diff.source_id,
        upserted=len(diff.upserts),
        unchanged=len(diff.unchanged),
        deleted=len(diff.deletes),
        enqueued=len(sync.enqueued),
        already_live=len(sync.skipped),
        poll_job_id=poll_job_id,
    )
