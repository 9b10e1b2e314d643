"""Enqueue refuses what the ledger could not store or read back, on both backends: the
refusal is ``request.invalid`` and nothing is appended."""

from __future__ import annotations

from typing import Any

import pytest
from input_helpers import DEEPEST, TOO_DEEP, head, nested, nested_list

from ledger import InvalidRequestError, Ledger, Subject
from ledger.core.limits import MAX_NAME_LENGTH

BAD_PAYLOADS: dict[str, dict[str, Any]] = {
    "too deep": TOO_DEEP,
    "far too deep": nested(5_000),
    "too deep in an array": {"a": nested_list(64)},
    "integer beyond 64 bits": {"n": 2**64},
    "negative integer beyond 64 bits": {"n": -(2**63) - 1},
    "NaN": {"x": float("nan")},
    "Infinity": {"x": float("inf")},
    "NUL in a string": {"s": "a\x00b"},
    "NUL in a key": {"a\x00": 1},
    "lone surrogate": {"s": "\ud800"},
    "not JSON": {"s": {1, 2}},
    "key not a string": {"a": {1: "x"}},
}


@pytest.mark.parametrize("case", sorted(BAD_PAYLOADS))
def test_enqueue_refuses_payloads_the_ledger_cannot_read_back(defined: Ledger, case: str) -> None:
    """Too deep, too large an integer, NaN/Infinity, NUL, lone surrogates: request.invalid."""
    before = head(defined)
    with pytest.raises(InvalidRequestError):
        defined.enqueue("t", BAD_PAYLOADS[case])
    assert head(defined) == before


def test_a_payload_at_the_depth_limit_is_stored_and_read_back(defined: Ledger) -> None:
    """64 levels is accepted, and the state and history read back equal."""
    job_id = defined.enqueue("t", DEEPEST).job_id
    assert job_id is not None
    state = defined.get(job_id)
    assert state is not None and state.payload == DEEPEST
    assert defined.history(job_id)[0].event.request.payload == DEEPEST  # type: ignore[attr-defined]


def test_the_largest_64_bit_integers_are_stored_exactly(defined: Ledger) -> None:
    """-2**63 and 2**63 - 1 are accepted and come back unchanged."""
    payload = {"low": -(2**63), "high": 2**63 - 1}
    job_id = defined.enqueue("t", payload).job_id
    assert job_id is not None
    state = defined.get(job_id)
    assert state is not None and state.payload == payload


BAD_FIELDS: dict[str, dict[str, Any]] = {
    "empty org": {"org": ""},
    "NUL in org": {"org": "acme\x00"},
    "escape in org": {"org": "acme\x1b[31m"},
    "CR/LF in queue": {"queue": "q\r\nforged"},
    "long idempotency key": {"idempotency_key": "k" * (MAX_NAME_LENGTH + 1)},
    "NUL in idempotency key": {"idempotency_key": "k\x00"},
    "surrogate in subject uri": {"subject": Subject(source_id="s", uri="file:\udc80")},
    "NUL in subject revision": {"subject": Subject(source_id="s", uri="u", revision="r\x00")},
    "huge delay": {"delay_s": 1e12},
    "huge timeout": {"timeout_s": 1e300},
    "max_attempts beyond 32 bits": {"max_attempts": 2**40},
}


@pytest.mark.parametrize("case", sorted(BAD_FIELDS))
def test_enqueue_refuses_fields_outside_the_bounds(defined: Ledger, case: str) -> None:
    """Names with NUL or control characters, empty orgs, durations past any storable time."""
    before = head(defined)
    with pytest.raises(InvalidRequestError):
        defined.enqueue("t", **BAD_FIELDS[case])
    assert head(defined) == before
