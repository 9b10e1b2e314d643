"""Claims on both backends: ordering, scheduling, type filters, real concurrency."""

from __future__ import annotations

import threading
from datetime import timedelta
from uuid import UUID

import pytest

from ledger import EnqueueRequest, FakeClock, JobStatus, Ledger, Stage
from ledger.core.events import JobLeased


def test_claim_orders_by_priority_then_run_at_then_enqueue_order(
    defined: Ledger, clock: FakeClock
) -> None:
    """priority DESC, run_at ASC, enqueue order ASC."""
    now = clock.now()
    low = defined.enqueue("t", {"n": "low"}, priority=1).job_id
    late_high = defined.enqueue("t", {"n": "late_high"}, priority=9, run_at=now).job_id
    early_high = defined.enqueue(
        "t", {"n": "early_high"}, priority=9, run_at=now - timedelta(seconds=1)
    ).job_id
    first_mid = defined.enqueue("t", {"n": "first_mid"}, priority=5).job_id
    second_mid = defined.enqueue("t", {"n": "second_mid"}, priority=5).job_id
    claimed = [defined.claim("w")[0].job_id for _ in range(5)]
    assert claimed == [early_high, late_high, first_mid, second_mid, low]


def test_a_batch_claim_returns_jobs_in_claim_order_up_to_the_limit(defined: Ledger) -> None:
    """claim(limit=n) leases n jobs at once, in order."""
    ids = [
        e.job_id
        for e in defined.enqueue_many([EnqueueRequest(job_type="t", priority=p) for p in range(6)])
    ]
    claimed = defined.claim("w", limit=4)
    assert [job.job_id for job in claimed] == list(reversed(ids))[:4]
    assert all(job.status is JobStatus.LEASED for job in claimed)
    assert defined.counts() == {"leased": 4, "pending": 2}


def test_future_scheduled_jobs_are_skipped_until_due(defined: Ledger, clock: FakeClock) -> None:
    """run_at > now is not claimable; at run_at it is."""
    later = defined.enqueue("t", delay_s=60).job_id
    assert defined.claim("w") == []
    clock.advance(59)
    assert defined.claim("w") == []
    clock.advance(1)
    [job] = defined.claim("w")
    assert job.job_id == later


def test_type_filter_and_the_empty_filter(defined: Ledger) -> None:
    """types=[...] claims only those types; an empty list claims nothing at all."""
    defined.define("u")
    u_job = defined.enqueue("u").job_id
    defined.enqueue("t")
    before = defined.store.head_position()
    assert defined.claim("w", types=[]) == []
    assert defined.store.head_position() == before
    [job] = defined.claim("w", types=["u", "absent"])
    assert job.job_id == u_job


def test_claim_sets_attempt_worker_lease_and_first_heartbeat(
    defined: Ledger, clock: FakeClock
) -> None:
    """A claim is one job_leased event: attempt+1, worker, now+lease, heartbeat now."""
    job_id = defined.enqueue("t").job_id
    assert job_id is not None
    [job] = defined.claim("worker-1", lease_s=45)
    now = clock.now()
    assert (job.attempt, job.worker_id, job.stage) == (1, "worker-1", Stage.CLAIMED)
    assert job.lease_expires_at == now + timedelta(seconds=45)
    assert job.last_heartbeat_at == now
    assert defined.get(job_id) == job
    event = defined.history(job_id)[-1].event
    assert isinstance(event, JobLeased) and event.attempt == 1


def _race(url: str, clock: FakeClock, claimers: int) -> list[list[UUID]]:
    """Release ``claimers`` threads at once, each with its own connection, claiming one job."""
    barrier = threading.Barrier(claimers)
    results: list[list[UUID]] = [[] for _ in range(claimers)]
    errors: list[BaseException] = []
    ledgers = [Ledger.open(url, clock=clock, pool_size=1) for _ in range(claimers)]

    def claim(index: int) -> None:
        try:
            barrier.wait(timeout=10)
            results[index] = [j.job_id for j in ledgers[index].claim(f"w{index}")]
        except BaseException as exc:  # surfaced below, not swallowed
            errors.append(exc)

    threads = [threading.Thread(target=claim, args=(i,)) for i in range(claimers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    for opened in ledgers:
        opened.close()
    assert not errors, errors
    return results


@pytest.mark.parametrize("backend", ["postgres", "sqlite"])
def test_ten_concurrent_claimers_over_five_jobs_claim_exactly_five_distinct(
    backend: str, request: pytest.FixtureRequest, clock: FakeClock
) -> None:
    """Real concurrency: no job is leased twice, none is lost, five claimers get nothing."""
    url = str(request.getfixturevalue("pg_url" if backend == "postgres" else "sqlite_url"))
    with Ledger.open(url, clock=clock) as ledger:
        ledger.define("t")
        ids = [
            e.job_id for e in ledger.enqueue_many([EnqueueRequest(job_type="t") for _ in range(5)])
        ]
    results = _race(url, clock, claimers=10)
    claimed = [job_id for result in results for job_id in result]
    assert len(claimed) == 5 and set(claimed) == set(ids)
    assert sum(1 for result in results if not result) == 5
    with Ledger.open(url, clock=clock) as ledger:
        for job_id in claimed:
            history = ledger.history(job_id)
            assert [type(r.event) for r in history].count(JobLeased) == 1
