"""What workers write is bounded, on both backends: claims, heartbeats, progress,
checkpoints, outputs and failures outside the bounds are ``request.invalid`` with nothing
appended; a failure message is cut, never refused."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from input_helpers import DEEPEST, TOO_DEEP, claimed, head

from ledger import Failure, FailureKind, InvalidRequestError, Lease, Ledger
from ledger.core.limits import MAX_JSON_BYTES, MAX_MESSAGE_BYTES, MAX_NAME_LENGTH, TRUNCATED

Write = Callable[[Ledger, Lease], object]


def _fail(code: str, message: str = "m") -> Write:
    failure = Failure(kind=FailureKind.RETRYABLE, code=code, message=message)
    return lambda ledger, lease: ledger.fail(lease, failure)


BAD_WRITES: dict[str, Write] = {
    "heartbeat lease 1e12 s": lambda led, lease: led.heartbeat(lease, lease_s=1e12),
    "heartbeat lease <= 0": lambda led, lease: led.heartbeat(lease, lease_s=-5),
    "heartbeat lease 0": lambda led, lease: led.heartbeat(lease, lease_s=0),
    "heartbeat lease NaN": lambda led, lease: led.heartbeat(lease, lease_s=float("nan")),
    "progress done 2**70": lambda led, lease: led.progress(lease, done=2**70),
    "progress total 2**63": lambda led, lease: led.progress(lease, total=2**63),
    "progress done > total": lambda led, lease: led.progress(lease, done=11, total=10),
    "stage with an escape": lambda led, lease: led.progress(lease, stage="run\x1b[2J"),
    "checkpoint too deep": lambda led, lease: led.progress(lease, checkpoint=TOO_DEEP),
    "checkpoint NaN": lambda led, lease: led.progress(lease, checkpoint={"x": float("nan")}),
    "output too deep": lambda led, lease: led.succeed(lease, output=TOO_DEEP),
    "output over 1 MiB": lambda led, lease: led.succeed(lease, output="x" * MAX_JSON_BYTES),
    "output integer beyond 64 bits": lambda led, lease: led.succeed(lease, output=2**64),
    "output Infinity": lambda led, lease: led.succeed(lease, output=[float("inf")]),
    "output lone surrogate": lambda led, lease: led.succeed(lease, output={"s": "\udfff"}),
    "revision with NUL": lambda led, lease: led.succeed(lease, revision="r\x00"),
    "failure code empty": _fail(""),
    "failure code too long": _fail("c" * (MAX_NAME_LENGTH + 1)),
    "failure code with CR/LF": _fail("code\r\nforged"),
    "failure code with a space": _fail("not a code"),
    "release reason with NUL": lambda led, lease: led.release(lease, reason="r\x00"),
}


@pytest.mark.parametrize("case", sorted(BAD_WRITES))
def test_worker_writes_outside_the_bounds_are_refused(defined: Ledger, case: str) -> None:
    """Each bad worker write raises request.invalid and appends nothing; the lease holds."""
    lease = claimed(defined)
    before = head(defined)
    with pytest.raises(InvalidRequestError):
        BAD_WRITES[case](defined, lease)
    assert head(defined) == before
    assert defined.heartbeat(lease).status == "leased"


@pytest.mark.parametrize(
    ("first", "then"),
    [({"total": 10}, {"done": 11}), ({"done": 8, "total": 10}, {"total": 5})],
)
def test_progress_is_held_to_the_counts_recorded_before(
    defined: Ledger, first: dict[str, int], then: dict[str, int]
) -> None:
    """``done <= total`` holds across calls: a count a call leaves out is the one recorded
    before, so ``total`` then a larger ``done`` alone (or a ``total`` below the ``done``
    recorded) is refused and appends nothing."""
    lease = claimed(defined)
    defined.progress(lease, **first)
    before = head(defined)
    with pytest.raises(InvalidRequestError, match="as recorded before"):
        defined.progress(lease, **then)
    assert head(defined) == before


@pytest.mark.parametrize(
    ("worker_id", "lease_s"),
    [("w", 1e12), ("w", -1.0), ("w\x1b]0;pwned\x07", 30.0), ("w\x00", 30.0)],
)
def test_claims_with_a_bad_worker_id_or_lease_are_refused(
    defined: Ledger, worker_id: str, lease_s: float
) -> None:
    """A claim whose lease cannot be stored, or whose worker id is not a name, leases nothing."""
    defined.enqueue("t")
    before = head(defined)
    with pytest.raises(InvalidRequestError):
        defined.claim(worker_id, lease_s=lease_s)
    assert head(defined) == before


def test_outputs_and_checkpoints_at_the_limits_are_stored(defined: Ledger) -> None:
    """A checkpoint 64 levels deep and an output just under 1 MiB are accepted and read back."""
    lease = claimed(defined)
    defined.progress(lease, checkpoint=DEEPEST, done=3, total=3)
    big = "x" * (MAX_JSON_BYTES - 2)  # two bytes of quotes
    state = defined.succeed(lease, output=big)
    assert state.output == big and state.checkpoint == DEEPEST


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        ("é" * MAX_MESSAGE_BYTES, None),
        ("boom\x00tail", "boom\\x00tail"),
        ("half \ud800 a pair", "half \\ud800 a pair"),
    ],
)
def test_a_failure_message_is_normalised_not_refused(
    defined: Ledger, message: str, expected: str | None
) -> None:
    """Cut to 8 KiB (marked), NUL and lone surrogates escaped: a failure is always recorded."""
    lease = claimed(defined)
    failure = Failure(kind=FailureKind.TERMINAL, code="doc.bad", message=message)
    state = defined.fail(lease, failure)
    assert state.status == "dead" and state.last_error is not None
    stored: Any = state.last_error.message
    if expected is None:
        assert len(stored.encode()) <= MAX_MESSAGE_BYTES and stored.endswith(TRUNCATED)
        assert message.startswith(stored.removesuffix(TRUNCATED))
    else:
        assert stored == expected
    assert defined.replay_check(lease.job_id).findings == []
