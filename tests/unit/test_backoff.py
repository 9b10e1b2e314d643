"""Backoff: exponential, capped, jittered by a draw the caller supplies."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ledger.core.backoff import base_delay, delay_bounds, retry_delay
from ledger.core.values import BackoffPolicy


def test_base_delay_doubles_per_attempt_until_the_cap() -> None:
    """min(base * 2**(attempt-1), max) for attempts 1, 2, 3, …"""
    policy = BackoffPolicy(base_s=1.0, max_s=10.0, jitter=0.0)
    assert [base_delay(policy, n) for n in range(1, 7)] == [1.0, 2.0, 4.0, 8.0, 10.0, 10.0]


def test_huge_attempt_numbers_hit_the_cap_without_overflow() -> None:
    """Attempt counts far beyond float range still give the cap."""
    policy = BackoffPolicy(base_s=1.0, max_s=60.0)
    assert base_delay(policy, 10_000) == 60.0


def test_no_jitter_gives_the_exact_base_delay_for_any_draw() -> None:
    """jitter=0 makes the draw irrelevant."""
    policy = BackoffPolicy(base_s=3.0, max_s=100.0, jitter=0.0)
    assert retry_delay(policy, 2, 0.0) == retry_delay(policy, 2, 0.999) == 6.0


def test_jitter_spans_plus_minus_its_fraction() -> None:
    """A draw of 0 gives base*(1-j), 0.5 gives base, near 1 approaches base*(1+j)."""
    policy = BackoffPolicy(base_s=4.0, max_s=100.0, jitter=0.25)
    assert retry_delay(policy, 1, 0.0) == pytest.approx(3.0)
    assert retry_delay(policy, 1, 0.5) == pytest.approx(4.0)
    assert retry_delay(policy, 1, 0.999999) == pytest.approx(5.0, rel=1e-5)


@given(
    attempt=st.integers(min_value=1, max_value=100),
    draw=st.floats(min_value=0.0, max_value=0.999999),
    jitter=st.floats(min_value=0.0, max_value=0.9),
)
def test_every_delay_lies_within_the_policy_bounds(
    attempt: int, draw: float, jitter: float
) -> None:
    """Whatever the draw, the delay stays within delay_bounds (what replay checks)."""
    policy = BackoffPolicy(base_s=0.5, max_s=300.0, jitter=jitter)
    low, high = delay_bounds(policy, attempt)
    assert low - 1e-9 <= retry_delay(policy, attempt, draw) <= high + 1e-9


def test_a_draw_outside_the_unit_interval_is_refused() -> None:
    """The draw is a probability-like number in [0, 1)."""
    with pytest.raises(ValueError):
        retry_delay(BackoffPolicy(), 1, 1.0)
