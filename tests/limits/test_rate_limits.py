"""Rate limits on both backends: at most N leases per period per key, refilled by the clock,
jobs over the limit left pending with the reason, the buckets a fold of the leases."""

from __future__ import annotations

from datetime import timedelta

import msgspec
import pytest

from ledger import EnqueueRequest, JobStatus, Ledger
from ledger.clock import FakeClock
from ledger.core.errors import InvalidRequestError
from ledger.core.events import JobLeased
from ledger.core.rates import parse_rate
from ledger.core.values import JobDefinition, RateLimit


def _leases(ledger: Ledger, job_ids: list) -> list[JobLeased]:  # type: ignore[type-arg]
    return [
        r.event
        for job_id in job_ids
        for r in ledger.history(job_id)
        if isinstance(r.event, JobLeased)
    ]


def _views_hold(ledger: Ledger) -> None:
    report = ledger.projections().verify()
    assert report.clean, report
    assert [f for replay in ledger.replay_check_all() for f in replay.findings] == []


def test_a_rate_limit_caps_leases_per_period_and_the_clock_refills_it(
    ledger: Ledger, clock: FakeClock
) -> None:
    """3/1m: a claim of 10 leases 3, the next claims none (the rest stay pending), a third
    of the period later one token is back, a whole period later all 3."""
    ledger.define("api", rate=parse_rate("3/1m"))
    ids = [
        e.job_id for e in ledger.enqueue_many([EnqueueRequest(job_type="api") for _ in range(10)])
    ]
    assert len(ledger.claim("w", limit=10)) == 3
    assert ledger.claim("w", limit=10) == []
    assert ledger.counts() == {"leased": 3, "pending": 7}
    clock.advance(19.9)
    assert ledger.claim("w", limit=10) == []
    clock.advance(0.1)
    assert len(ledger.claim("w", limit=10)) == 1
    clock.advance(60)
    assert len(ledger.claim("w", limit=10)) == 3
    leases = _leases(ledger, ids)
    assert len(leases) == 7
    assert {lease.rate for lease in leases} == {RateLimit(limit=3, period_s=60.0)}
    _views_hold(ledger)


def test_unlimited_types_flow_past_an_exhausted_key(ledger: Ledger) -> None:
    """An exhausted key's jobs, first in claim order, do not hold back another type's; the
    unlimited type's leases carry no rate (stored as before rates existed)."""
    ledger.define("api", rate=RateLimit(limit=1, period_s=3600.0))
    ledger.define("free")
    ledger.enqueue_many([EnqueueRequest(job_type="api", priority=9) for _ in range(3)])
    free = [
        e.job_id for e in ledger.enqueue_many([EnqueueRequest(job_type="free") for _ in range(2)])
    ]
    claimed = ledger.claim("w", limit=10)
    assert sorted(job.job_type for job in claimed) == ["api", "free", "free"]
    assert all(lease.rate is None for lease in _leases(ledger, free))
    assert b"rate" not in msgspec.msgpack.encode(_leases(ledger, free)[0])
    assert ledger.claim("w", limit=10) == []
    _views_hold(ledger)


def test_a_per_org_rate_gives_each_org_its_own_bucket(ledger: Ledger, clock: FakeClock) -> None:
    """--rate-per-org 2/1h: each org (and the jobs without one) gets 2 leases an hour."""
    ledger.define("mail", rate=parse_rate("2/1h", per_org=True))
    for org in ("acme", "globex", None):
        ledger.enqueue_many([EnqueueRequest(job_type="mail", org=org) for _ in range(4)])
    claimed = ledger.claim("w", limit=20)
    by_org: dict[str | None, int] = {}
    for job in claimed:
        by_org[job.org] = by_org.get(job.org, 0) + 1
    assert by_org == {"acme": 2, "globex": 2, None: 2}
    assert {(b.scope, b.org) for b in ledger.limits.rate_buckets()} == {
        ("org", "acme"),
        ("org", "globex"),
        ("org", ""),
    }
    _views_hold(ledger)


def test_the_finish_and_claim_turn_keeps_the_limit(ledger: Ledger) -> None:
    """The batch turn claims through the same rate step as claim."""
    ledger.define("api", rate=RateLimit(limit=2, period_s=60.0))
    ledger.enqueue_many([EnqueueRequest(job_type="api") for _ in range(5)])
    turn = ledger.finish_and_claim([], "w", limit=5)
    assert len(turn.claimed) == 2
    assert ledger.finish_and_claim([], "w", limit=5).claimed == []


def test_a_rate_limited_job_stays_pending_and_says_until_when(
    ledger: Ledger, clock: FakeClock
) -> None:
    """A job over the limit is pending, not failed, and its blockers say "rate limited until"
    the next token's time; once that time comes it has no blocker and is claimed."""
    ledger.define("api", rate=RateLimit(limit=1, period_s=30.0))
    first, second = [
        e.job_id for e in ledger.enqueue_many([EnqueueRequest(job_type="api") for _ in range(2)])
    ]
    start = clock.now()
    [claimed] = ledger.claim("w", limit=5)
    assert claimed.job_id == first
    [blocker] = ledger.blockers(second)
    assert blocker.reason == "rate_limited"
    assert blocker.until == start + timedelta(seconds=30)
    assert "rate limited until" in blocker.message
    state = ledger.get(second)
    assert state is not None and state.status is JobStatus.PENDING
    clock.set(start + timedelta(seconds=30))
    assert ledger.blockers(second) == []
    assert [job.job_id for job in ledger.claim("w")] == [second]


def test_a_policy_change_is_the_definition_event(ledger: Ledger, clock: FakeClock) -> None:
    """A changed rate starts the type's buckets afresh at the next claim (the old bucket
    limits nothing); removing the rate removes the limit, and a definition without a rate has
    the bytes it always had."""
    ledger.define("api", rate=RateLimit(limit=1, period_s=60.0))
    ledger.enqueue_many([EnqueueRequest(job_type="api") for _ in range(6)])
    assert len(ledger.claim("w", limit=10)) == 1
    assert ledger.claim("w", limit=10) == []
    ledger.define("api", rate=RateLimit(limit=3, period_s=60.0))
    assert len(ledger.claim("w", limit=10)) == 3
    assert ledger.claim("w", limit=10) == []
    ledger.define("api")
    assert len(ledger.claim("w", limit=10)) == 2
    plain = msgspec.msgpack.encode(JobDefinition(job_type="api"))
    assert b"rate" not in plain
    _views_hold(ledger)


@pytest.mark.parametrize("text", ["", "10", "0/1m", "10/0s", "x/1m", "10/1w", "2000000/1s"])
def test_a_bad_rate_is_refused(text: str) -> None:
    """A rate that is not N/PERIOD, or one no bucket can keep, is refused."""
    with pytest.raises(InvalidRequestError):
        parse_rate(text)
