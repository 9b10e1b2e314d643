"""The pure rate buckets and blockers: the bucket holds at most its limit, refills at its
rate, the view's in-memory spend agrees with the core fold, and each blocker says why."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from uuid import uuid4

from hypothesis import given
from hypothesis import strategies as st

from ledger.core import blockers
from ledger.core.decide import decide_enqueue
from ledger.core.queue_pauses import QueuePaused, evolve_queue
from ledger.core.rates import interval_us, next_token_us, parse_rate, rate_text, spend, tokens
from ledger.core.state import evolve
from ledger.core.values import EnqueueRequest, JobDefinition, RateLimit
from ledger.views.rate_buckets import SPEND, VIEW
from ledger.views.view import MemoryTable

NOW = datetime(2026, 1, 1, tzinfo=UTC)


@given(
    limit=st.integers(1, 50),
    period_s=st.integers(1, 7200),
    gaps=st.lists(st.integers(0, 10_000_000_000), min_size=1, max_size=60),
)
def test_a_bucket_never_lends_more_than_it_holds(
    limit: int, period_s: int, gaps: list[int]
) -> None:
    """Spending only while a token is held, the leases in any window of one period never
    exceed 2 * limit - 1 (a full bucket plus its refill), and tokens stay in [0, limit]; the
    view's spend keeps the same tat as the core's."""
    rate = RateLimit(limit=limit, period_s=float(period_s))
    tat: int | None = None
    at = 0
    spent: list[int] = []
    table = MemoryTable()
    for gap in gaps:
        at += gap
        while tokens(tat, rate, at) > 0:
            assert 0 <= tokens(tat, rate, at) <= limit
            tat = spend(tat, rate, at)
            spent.append(at)
            VIEW.applies[SPEND](
                table,
                {"job_type": "t", "scope": "type", "org": "", "rate_limit": limit,
                 "interval_us": interval_us(rate), "at": at},
            )  # fmt: skip
            assert table.rows[("t", "type", "")]["tat"] == tat
        assert tat is not None and tokens(tat, rate, next_token_us(tat, rate)) >= 1
    window = period_s * 1_000_000
    for start in spent:
        assert sum(start <= t < start + window for t in spent) <= 2 * limit - 1


def test_rates_read_and_write_as_n_per_period() -> None:
    """parse_rate and rate_text are inverses on the usual spellings."""
    assert parse_rate("10/1m") == RateLimit(limit=10, period_s=60.0)
    assert parse_rate("100/h", per_org=True) == RateLimit(limit=100, period_s=3600.0, per_org=True)
    for text in ("10/1m", "100/1h", "5/30s", "1000/1d", "7/90s"):
        assert rate_text(parse_rate(text)) == text


def test_each_blocker_says_why_and_until_when() -> None:
    """not due, paused queue, rate limited, open breaker and disabled type each name their
    reason; a leased job has none."""
    job_id = uuid4()
    request = EnqueueRequest(job_type="api", queue="mail", run_at=NOW + timedelta(minutes=5))
    state = evolve(None, decide_enqueue(job_id, request, JobDefinition(job_type="api"), NOW))
    due = blockers.not_due(state, NOW)
    assert due is not None and due.until == NOW + timedelta(minutes=5)
    paused = evolve_queue(None, QueuePaused(at=NOW, queue="mail", actor="ops", reason="smtp"))
    held = blockers.queue_paused(state, paused)
    assert held is not None and "paused by ops" in held.message
    rate = RateLimit(limit=1, period_s=60.0)
    tat = spend(None, rate, 0)
    limited = blockers.rate_limited(state, rate, tat, datetime.fromtimestamp(0, UTC))
    assert limited is not None and limited.until == datetime.fromtimestamp(60, UTC)
    reasons = [f"circuit breaker open for 'api' until {(NOW + timedelta(seconds=30)).isoformat()}"]
    breaker = blockers.breaker_open(state, reasons)
    assert breaker is not None and breaker.until == NOW + timedelta(seconds=30)
    disabled = blockers.type_disabled(state, False)
    assert disabled is not None and not disabled.blocking
    assert blockers.type_disabled(state, True) is None
