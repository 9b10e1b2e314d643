"""The source-poll fold and decisions, without a database: the breaker opens at the
threshold, skips until the cool-down, reopens at once on a failed probe, closes on success;
illegal sequences are refused; every event round-trips through the codec."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from ledger.core.codec import DEFAULT_CODEC
from ledger.core.events import Event
from ledger.core.source_polls.decide import (
    BREAKER_OPEN,
    BreakerPolicy,
    failed_poll,
    skip_for_breaker,
)
from ledger.core.source_polls.events import SourceBreakerOpened, SourcePolled
from ledger.core.source_polls.state import (
    BreakerState,
    PollResult,
    SourcePollState,
    evolve_source_poll,
)
from ledger.core.state import IllegalTransitionError

T0 = datetime(2026, 1, 1, tzinfo=UTC)
POLICY = BreakerPolicy(threshold=2, cooldown_s=60)


def _fold(state: SourcePollState | None, events: list[Event]) -> SourcePollState:
    for event in events:
        state = evolve_source_poll(state, event)
    assert state is not None
    return state


def _fail(state: SourcePollState | None, at: datetime) -> tuple[SourcePollState, list[Event]]:
    events = failed_poll(
        state, "s", at, error="boom\ntrace", code="OSError", policy=POLICY, poll_job_id=None
    )
    return _fold(state, events), events


def test_breaker_lifecycle() -> None:
    """Fail, fail (opens), skipped while open, half-open after the cool-down, a failed probe
    reopens at once, a success closes it and clears the error."""
    state, events = _fail(None, T0)
    assert [e.name for e in events] == ["source_poll_failed"] and state.last_error == "boom"
    assert skip_for_breaker(state, T0, poll_job_id=None) is None
    state, events = _fail(state, T0 + timedelta(seconds=1))
    assert [e.name for e in events] == ["source_poll_failed", "source_breaker_opened"]
    assert state.breaker(T0 + timedelta(seconds=60)) is BreakerState.OPEN
    skip = skip_for_breaker(state, T0 + timedelta(seconds=30), poll_job_id=None)
    assert skip is not None and skip.code == BREAKER_OPEN
    state = _fold(state, [skip])
    assert (state.last_result, state.failures, state.polls) == (PollResult.SKIPPED, 2, 3)
    later = T0 + timedelta(seconds=61)
    assert state.breaker(later) is BreakerState.HALF_OPEN
    assert skip_for_breaker(state, later, poll_job_id=None) is None
    state, events = _fail(state, later)
    assert events[-1].name == "source_breaker_opened" and state.breaker(later) is BreakerState.OPEN
    polled = SourcePolled(
        at=later, source="s", upserted=1, unchanged=0, deleted=0, enqueued=1,
        already_live=0, poll_job_id=None,
    )  # fmt: skip
    state = _fold(state, [polled])
    assert state.breaker(later) is BreakerState.CLOSED
    assert (state.failures, state.last_error, state.last_skip_reason) == (0, None, None)


def test_illegal_sequences_are_refused() -> None:
    """A breaker opened without a failure before it, or a failure count that skips one."""
    opened = SourceBreakerOpened(
        at=T0, source="s", failures=1, threshold=1, cooldown_s=1.0, until=T0
    )
    with pytest.raises(IllegalTransitionError):
        evolve_source_poll(None, opened)
    state, [failed] = _fail(None, T0)
    with pytest.raises(IllegalTransitionError):
        evolve_source_poll(state, failed)  # #1 again after one failure
    with pytest.raises(ValueError, match="threshold"):
        BreakerPolicy(threshold=0)


def test_events_round_trip_through_the_codec() -> None:
    """Each poll event encodes under its stable topic and decodes equal."""
    _, events = _fail(_fail(None, T0)[0], T0)
    for event in events:
        topic, blob = DEFAULT_CODEC.encode(event)
        assert topic == f"{event.name}.v1"
        assert DEFAULT_CODEC.decode(topic, blob) == event
