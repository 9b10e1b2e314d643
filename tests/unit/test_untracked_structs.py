"""Requests, events and job states are not tracked by the cycle collector (msgspec gc=False,
ledger/core/events.py:_Value): what they hold cannot form a cycle, and bulk enqueue makes
several of them per job."""

from __future__ import annotations

import gc
from datetime import UTC, datetime
from uuid import UUID

from ledger.core.codec import DEFAULT_CODEC
from ledger.core.decide import decide_enqueue
from ledger.core.requests import normalise_request
from ledger.core.state import evolve
from ledger.core.values import EnqueueRequest, JobDefinition, Subject

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def test_requests_events_and_states_are_untracked_and_round_trip() -> None:
    """A request, its event (as built and as decoded) and the state are all untracked."""
    request = normalise_request(
        EnqueueRequest("t", {"a": [1, {"b": 2}]}, subject=Subject(source_id="s", uri="u"))
    )
    event = decide_enqueue(UUID(int=1), request, JobDefinition(job_type="t"), NOW)
    state = evolve(None, event)
    decoded = DEFAULT_CODEC.decode(*DEFAULT_CODEC.encode(event))
    assert decoded == event
    for value in (request, request.subject, event, event.backoff, state, decoded):
        assert not gc.is_tracked(value), type(value).__name__
    assert gc.is_tracked(request.payload)  # what they hold is tracked as ever
