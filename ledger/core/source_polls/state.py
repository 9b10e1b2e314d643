"""A source's poll fold: its last poll, that poll's result, and the source's breaker. Pure."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from uuid import UUID, uuid5

import msgspec
from msgspec.structs import replace

from ledger.core.events import Event
from ledger.core.source_polls.events import (
    SourceBreakerOpened,
    SourcePolled,
    SourcePollFailed,
    SourcePollSkipped,
)
from ledger.core.state import IllegalTransitionError

SOURCE_NAMESPACE = UUID("5d3f2b7e-8a41-4c6e-b1d9-2e7a0c94f6b3")


def source_stream_id(source: str) -> UUID:
    """The originator id of a source's poll stream (stable across databases)."""
    return uuid5(SOURCE_NAMESPACE, f"source:{source}")


class PollResult(StrEnum):
    """How a poll ended."""

    POLLED = "polled"
    FAILED = "failed"
    SKIPPED = "skipped"


class BreakerState(StrEnum):
    """A source's breaker at a given time: ``open`` until its cool-down ends, then
    ``half_open`` (the next poll runs as a probe) until a poll succeeds."""

    CLOSED = "closed"
    OPEN = "open"
    HALF_OPEN = "half_open"


class PollCounts(msgspec.Struct, frozen=True):
    """What a successful poll found and enqueued (``source_polled``'s counts)."""

    upserted: int
    unchanged: int
    deleted: int
    enqueued: int
    already_live: int


class SourcePollState(msgspec.Struct, frozen=True):
    """A source's polls as its stream tells them (the source-polls view's row)."""

    source: str
    version: int
    polls: int
    """Polls that ended (polled, failed or skipped)."""
    last_poll_at: datetime
    last_result: PollResult
    last_counts: PollCounts | None
    """The last successful poll's counts (kept through later failures and skips)."""
    last_success_at: datetime | None
    last_error: str | None
    """The last failed poll's error (kept until a poll succeeds)."""
    last_error_code: str | None
    failures: int
    """Consecutive failed polls (a success resets it; skips leave it)."""
    breaker_open: bool
    """Opened by ``source_breaker_opened``, closed by the next ``source_polled``."""
    breaker_until: datetime | None
    """When the open breaker's cool-down ends (``None`` while closed)."""
    last_skip_reason: str | None
    """The last skipped poll's reason (``None`` once a poll ran after it)."""
    last_skip_code: str | None

    def breaker(self, now: datetime) -> BreakerState:
        """The breaker at ``now`` (the cool-down's end is derived, never recorded)."""
        if not self.breaker_open:
            return BreakerState.CLOSED
        assert self.breaker_until is not None
        return BreakerState.OPEN if now < self.breaker_until else BreakerState.HALF_OPEN


def _first(event: Event) -> SourcePollState:
    if isinstance(event, SourceBreakerOpened):
        raise IllegalTransitionError("source_breaker_opened before any failed poll")
    source = getattr(event, "source")  # noqa: B009 - every poll event has one
    return SourcePollState(
        source=source,
        version=0,
        polls=0,
        last_poll_at=event.at,
        last_result=PollResult.SKIPPED,
        last_counts=None,
        last_success_at=None,
        last_error=None,
        last_error_code=None,
        failures=0,
        breaker_open=False,
        breaker_until=None,
        last_skip_reason=None,
        last_skip_code=None,
    )


def evolve_source_poll(state: SourcePollState | None, event: Event) -> SourcePollState:
    """Apply one source-poll event. Pure."""
    current = _first(event) if state is None else state
    source = getattr(event, "source", None)
    if source != current.source:
        raise IllegalTransitionError(f"{event.name} of source {source} in {current.source}")
    version = current.version + 1
    if isinstance(event, SourcePolled):
        counts = PollCounts(
            event.upserted, event.unchanged, event.deleted, event.enqueued, event.already_live
        )
        return replace(
            current,
            version=version,
            polls=current.polls + 1,
            last_poll_at=event.at,
            last_result=PollResult.POLLED,
            last_counts=counts,
            last_success_at=event.at,
            last_error=None,
            last_error_code=None,
            failures=0,
            breaker_open=False,
            breaker_until=None,
            last_skip_reason=None,
            last_skip_code=None,
        )
    if isinstance(event, SourcePollFailed):
        if event.failures != current.failures + 1:
            raise IllegalTransitionError(
                f"source_poll_failed #{event.failures} of {current.source} after "
                f"{current.failures} consecutive failures"
            )
        return replace(
            current,
            version=version,
            polls=current.polls + 1,
            last_poll_at=event.at,
            last_result=PollResult.FAILED,
            last_error=event.error,
            last_error_code=event.code,
            failures=event.failures,
            last_skip_reason=None,
            last_skip_code=None,
        )
    if isinstance(event, SourceBreakerOpened):
        if current.last_result is not PollResult.FAILED or event.failures != current.failures:
            raise IllegalTransitionError(
                f"source_breaker_opened of {current.source} not right after its failed poll"
            )
        return replace(current, version=version, breaker_open=True, breaker_until=event.until)
    if isinstance(event, SourcePollSkipped):
        return replace(
            current,
            version=version,
            polls=current.polls + 1,
            last_poll_at=event.at,
            last_result=PollResult.SKIPPED,
            last_skip_reason=event.reason,
            last_skip_code=event.code,
        )
    raise IllegalTransitionError(f"not a source-poll event: {type(event).__name__}")
