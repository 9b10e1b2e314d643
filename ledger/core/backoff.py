"""Retry backoff: exponential, capped, with jitter drawn by the caller.

Pure: the random draw is an argument, so the decision can be replayed and checked
(``jitter_draw`` in ``[0, 1)``; 0.5 means no jitter).
"""

from __future__ import annotations

from ledger.core.values import BackoffPolicy


def base_delay(policy: BackoffPolicy, attempt: int) -> float:
    """``min(base_s * 2**(attempt-1), max_s)`` for ``attempt >= 1``."""
    exponent = max(attempt - 1, 0)
    # Cap the exponent before raising 2 to it: attempt counts can be large.
    if exponent > 62:
        return policy.max_s
    return min(policy.base_s * float(2**exponent), policy.max_s)


def retry_delay(policy: BackoffPolicy, attempt: int, jitter_draw: float) -> float:
    """The delay before retrying after failed ``attempt``: base delay scaled by ``1 ± jitter``."""
    if not 0.0 <= jitter_draw < 1.0:
        raise ValueError("jitter_draw must be in [0, 1)")
    scale = 1.0 + policy.jitter * (2.0 * jitter_draw - 1.0)
    return base_delay(policy, attempt) * scale


def delay_bounds(policy: BackoffPolicy, attempt: int) -> tuple[float, float]:
    """The smallest and largest delay the policy allows after ``attempt``."""
    base = base_delay(policy, attempt)
    return base * (1.0 - policy.jitter), base * (1.0 + policy.jitter)
