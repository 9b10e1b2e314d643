"""Concurrency limits and fair claim order on both backends (docs/operations.md)."""

from __future__ import annotations

from collections import Counter

import pytest

from ledger import EnqueueRequest, FakeClock, JobState, Ledger
from ledger.core.errors import InvalidRequestError
from ledger.jobs.outcomes import Completion


def _succeed_all(ledger: Ledger, jobs: list[JobState]) -> None:
    for job in jobs:
        assert job.lease is not None
        ledger.succeed(job.lease)


def test_a_type_limit_caps_live_leases_and_a_finish_frees_a_slot(defined: Ledger) -> None:
    """concurrency=2: a claim of 10 leases 2, the next none, and after one success one."""
    defined.define("t", concurrency=2)
    defined.enqueue_many([EnqueueRequest(job_type="t") for _ in range(5)])
    first = defined.claim("w", limit=10)
    assert len(first) == 2
    assert defined.claim("w2", limit=10) == []
    _succeed_all(defined, first[:1])
    assert len(defined.claim("w2", limit=10)) == 1
    assert defined.counts() == {"leased": 2, "pending": 2, "succeeded": 1}


def test_a_full_types_backlog_does_not_crowd_out_the_jobs_behind_it(defined: Ledger) -> None:
    """A limited type's jobs ahead in claim order are passed over, unlimited ones claimed."""
    defined.define("t", concurrency=1)
    defined.define("u")
    defined.enqueue_many([EnqueueRequest(job_type="t", priority=9) for _ in range(6)])
    behind = [
        e.job_id
        for e in defined.enqueue_many([EnqueueRequest(job_type="u", priority=1) for _ in range(3)])
    ]
    claimed = defined.claim("w", limit=4)
    assert Counter(job.job_type for job in claimed) == {"t": 1, "u": 3}
    assert [job.job_id for job in claimed if job.job_type == "u"] == behind


def test_a_reaped_lease_frees_its_slot_at_once(defined: Ledger, clock: FakeClock) -> None:
    """An expired lease holds its slot until the reaper records its end; then the slot is
    free for the next claim."""
    defined.define("t", concurrency=1)
    defined.enqueue_many([EnqueueRequest(job_type="t") for _ in range(2)])
    [held] = defined.claim("w", lease_s=10)
    clock.advance(11)
    assert defined.claim("w2") == []  # expired, not yet reaped: its worker may still run
    report = defined.reap()
    assert report.processed == 1
    [next_job] = defined.claim("w2")
    assert next_job.job_id != held.job_id


def test_a_per_org_limit_caps_each_org_apart(defined: Ledger) -> None:
    """per_org_concurrency=1: one live lease per org; jobs without an org are one org."""
    defined.define("t", per_org_concurrency=1)
    orgs = ["a", "a", "b", "b", None, None]
    defined.enqueue_many([EnqueueRequest(job_type="t", org=org) for org in orgs])
    claimed = defined.claim("w", limit=10)
    assert sorted(str(job.request.org) for job in claimed) == ["None", "a", "b"]
    assert defined.claim("w", limit=10) == []


def test_a_resource_limit_is_shared_by_the_types_naming_it(defined: Ledger) -> None:
    """Two types naming one resource hold its limit together, even when a claim asks for
    only one of them."""
    defined.define("t1", resource="db", resource_limit=3)
    defined.define("t2", resource="db", resource_limit=3)
    defined.enqueue_many([EnqueueRequest(job_type="t1", priority=200) for _ in range(2)])
    defined.enqueue_many([EnqueueRequest(job_type="t2") for _ in range(4)])
    claimed = defined.claim("w", limit=10)
    assert Counter(job.job_type for job in claimed) == {"t1": 2, "t2": 1}
    assert defined.claim("w", limit=10, types=["t2"]) == []


def test_a_turns_finished_jobs_free_their_slots_for_its_claim(defined: Ledger) -> None:
    """finish_and_claim counts the leases its own outcomes end as free."""
    defined.define("t", concurrency=1)
    defined.enqueue_many([EnqueueRequest(job_type="t") for _ in range(2)])
    [held] = defined.claim("w")
    assert held.lease is not None
    turn = defined.finish_and_claim([Completion(held.lease)], "w", limit=5)
    assert turn.finished.rejected == {}
    assert len(turn.claimed) == 1
    assert defined.counts() == {"leased": 1, "succeeded": 1}


def test_a_skewed_backlog_does_not_starve_the_small_org(defined: Ledger) -> None:
    """500 jobs of one org enqueued first, 5 of another after: the first claim of 10 takes
    the small org's 5 (round-robin across orgs), the rest from the big one."""
    big = [
        e.job_id
        for e in defined.enqueue_many([EnqueueRequest(job_type="t", org="big") for _ in range(500)])
    ]
    small = [
        e.job_id
        for e in defined.enqueue_many([EnqueueRequest(job_type="t", org="small") for _ in range(5)])
    ]
    claimed = defined.claim("w", limit=10)
    assert Counter(job.request.org for job in claimed) == {"big": 5, "small": 5}
    assert {job.job_id for job in claimed} >= set(small)
    # Within one org the order is the usual one: the big org's oldest jobs first.
    assert [job.job_id for job in claimed if job.request.org == "big"] == big[:5]


def test_claims_alternate_orgs_in_claim_order_within_each(defined: Ledger) -> None:
    """Rank within org first, then priority: a, b, a, b... each org in its own order."""
    a = [
        e.job_id
        for e in defined.enqueue_many(
            [EnqueueRequest(job_type="t", org="a", priority=p) for p in (1, 9)]
        )
    ]
    b = [
        e.job_id
        for e in defined.enqueue_many(
            [EnqueueRequest(job_type="t", org="b", priority=p) for p in (5, 3)]
        )
    ]
    claimed = [job.job_id for job in defined.claim("w", limit=4)]
    assert claimed == [a[1], b[0], b[1], a[0]]


def test_limits_are_validated(defined: Ledger) -> None:
    """A limit below 1, or a resource without its limit (or the reverse), is refused."""
    with pytest.raises(InvalidRequestError):
        defined.define("t", concurrency=0)
    with pytest.raises(InvalidRequestError):
        defined.define("t", resource="db")
    with pytest.raises(InvalidRequestError):
        defined.define("t", resource_limit=2)


def test_removing_a_limit_lets_the_backlog_run(defined: Ledger) -> None:
    """A definition change is an event; a limit removed no longer holds claims back."""
    defined.define("t", concurrency=1)
    defined.enqueue_many([EnqueueRequest(job_type="t") for _ in range(3)])
    assert len(defined.claim("w", limit=3)) == 1
    defined.define("t")
    assert len(defined.claim("w", limit=3)) == 2
    assert defined.counts() == {"leased": 3}


@pytest.mark.parametrize(
    "filters",
    [{"types": ["t"]}, {"queues": ["default"]}, {"types": ["t"], "queues": ["q", "default"]}],
)
def test_claims_by_type_or_queue_are_fair_across_orgs_too(
    defined: Ledger, filters: dict[str, list[str]]
) -> None:
    """Every claim query is fair: by type, by queue, by both."""
    defined.enqueue_many([EnqueueRequest(job_type="t", org="big") for _ in range(50)])
    small = [
        e.job_id
        for e in defined.enqueue_many([EnqueueRequest(job_type="t", org="small") for _ in range(2)])
    ]
    claimed = defined.claim("w", limit=4, **filters)
    assert {job.job_id for job in claimed} >= set(small)
    assert len(claimed) == 4
