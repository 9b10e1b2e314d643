"""Batch turns: a worker's outcomes and its next claim in one transaction, fenced per outcome;
and a pool that takes its turns while half its depth is still buffered or running."""

from __future__ import annotations

import asyncio
import sqlite3

import psycopg
import pytest

from ledger import EnqueueRequest, FakeClock, Ledger
from ledger.api.ledger import Completion
from ledger.core.errors import InvalidRequestError, LeaseOwnerMismatchError
from ledger.core.reaping import ReaperConfig
from ledger.core.values import JobStatus
from ledger.runtime.handlers import JobContext, Registry
from ledger.runtime.pool import WorkerPool
from ledger.store.config import sqlite_path

WORKER = "w@host:1"


def events_in_commit_order(db_url: str) -> list[tuple[str, str, str | None]]:
    """(job id, event name, writing transaction) of every event in commit order; the
    transaction (``xmin``) on PostgreSQL only, where writers commit concurrently."""
    query = "SELECT originator_id, topic, {} FROM jl_events ORDER BY {}"
    if db_url.startswith("postgresql"):
        with psycopg.connect(db_url) as conn:
            rows = conn.execute(query.format("xmin::text", "notification_id")).fetchall()
    else:
        with sqlite3.connect(sqlite_path(db_url)) as conn:
            rows = conn.execute(query.format("NULL", "rowid")).fetchall()
    return [(str(job), str(topic).split(".")[0], xact) for job, topic, xact in rows]


def test_a_turn_records_the_outcomes_then_claims_in_one_transaction(
    defined: Ledger, db_url: str
) -> None:
    """Two outcomes and two new leases: one transaction, the outcomes first in commit order."""
    ids = [e.job_id for e in defined.enqueue_many([EnqueueRequest(job_type="t") for _ in range(4)])]
    first = defined.claim(WORKER, limit=2, types=["t"])
    assert first[0].lease is not None and first[1].lease is not None
    before = len(events_in_commit_order(db_url))
    turn = defined.finish_and_claim(
        [Completion(first[0].lease, output=1), Completion(first[1].lease)],
        WORKER,
        limit=2,
        types=["t"],
    )
    assert [s.job_id for s in turn.finished.accepted] == ids[:2]
    assert {s.status for s in turn.finished.accepted} == {JobStatus.SUCCEEDED}
    assert turn.finished.rejected == {}
    assert [s.job_id for s in turn.claimed] == ids[2:]
    assert all(s.lease is not None and s.lease.worker_id == WORKER for s in turn.claimed)
    written = events_in_commit_order(db_url)[before:]
    assert [name for _, name, _ in written] == ["job_succeeded"] * 2 + ["job_leased"] * 2
    if db_url.startswith("postgresql"):
        assert len({xact for _, _, xact in written}) == 1


def test_an_outcome_on_a_lease_reaped_and_claimed_back_in_the_same_turn_is_refused(
    defined: Ledger, db_url: str, clock: FakeClock
) -> None:
    """The fence refuses the old attempt's outcome while the claim part commits: the job,
    reaped back to pending, is leased again by the same turn, under a new attempt."""
    stolen, other = [
        e.job_id for e in defined.enqueue_many([EnqueueRequest(job_type="t") for _ in range(2)])
    ]
    (held,) = defined.claim(WORKER, limit=1, types=["t"], lease_s=1.0)
    assert held.job_id == stolen and held.lease is not None
    clock.advance(2.0)
    defined.reap(ReaperConfig(retry_delay_s=0.0))
    assert defined.get(stolen).status == JobStatus.PENDING
    before = len(events_in_commit_order(db_url))
    turn = defined.finish_and_claim([Completion(held.lease)], WORKER, limit=2, types=["t"])
    assert turn.finished.accepted == []
    assert isinstance(turn.finished.rejected[stolen], LeaseOwnerMismatchError)
    assert {s.job_id for s in turn.claimed} == {stolen, other}
    again = defined.get(stolen)
    assert again.status == JobStatus.LEASED and again.attempt == held.attempt + 1
    written = events_in_commit_order(db_url)[before:]
    assert sorted(name for _, name, _ in written) == ["job_leased", "job_leased"]


def test_a_turn_with_no_room_only_records_and_a_negative_limit_is_refused(
    defined: Ledger,
) -> None:
    """``limit`` 0 records the outcomes and claims nothing; below 0 is a refused request."""
    defined.enqueue_many([EnqueueRequest(job_type="t") for _ in range(2)])
    (job,) = defined.claim(WORKER, limit=1, types=["t"])
    assert job.lease is not None
    with pytest.raises(InvalidRequestError):
        defined.finish_and_claim([Completion(job.lease)], WORKER, limit=-1, types=["t"])
    turn = defined.finish_and_claim([Completion(job.lease)], WORKER, limit=0, types=["t"])
    assert [s.status for s in turn.finished.accepted] == [JobStatus.SUCCEEDED]
    assert turn.claimed == []
    assert defined.counts() == {"succeeded": 1, "pending": 1}


JOBS = 240
CONCURRENCY, PREFETCH = 2, 4


async def drained_pool_history(db_url: str, **settings: object) -> list[tuple[str, str, str]]:
    """JOBS no-op jobs drained by a pool of depth CONCURRENCY + PREFETCH; the pool's events
    (all but the enqueues) in commit order."""
    registry = Registry()

    @registry.handler("fast")
    async def fast(ctx: JobContext) -> None:
        return None

    with Ledger.open(db_url, pool_size=4) as ledger:
        ledger.define("fast")
        ledger.enqueue_many([EnqueueRequest(job_type="fast") for _ in range(JOBS)])
        pool = WorkerPool(
            ledger, registry, concurrency=CONCURRENCY, prefetch=PREFETCH,
            poll_interval_s=0.05, batch_turns=True, **settings,  # type: ignore[arg-type]
        )  # fmt: skip
        await pool.start()
        try:
            while pool.stats.succeeded < JOBS:
                await asyncio.sleep(0.01)
        finally:
            await pool.stop()
        assert ledger.counts() == {"succeeded": JOBS}
    events = events_in_commit_order(db_url)
    return [(job, name, str(xact)) for job, name, xact in events if name != "job_enqueued"]


def by_transaction(events: list[tuple[str, str, str]]) -> list[list[str]]:
    """The event names of each writing transaction, in commit order."""
    groups: dict[str, list[str]] = {}
    for _, name, xact in events:
        groups.setdefault(xact, []).append(name)
    return list(groups.values())


@pytest.mark.parametrize("db_url", ["postgres"], indirect=True)
async def test_every_claim_of_a_busy_pool_records_the_outcomes_gathered_so_far(
    db_url: str,
) -> None:
    """While more jobs are due, each claim after the first records the outcomes that came in
    meanwhile in its own transaction (held for it up to ``turn_hold_s``: long here)."""
    groups = by_transaction(await drained_pool_history(db_url, turn_hold_s=30.0))
    claims = [names for names in groups if "job_leased" in names]
    assert len(claims) > 1
    assert all("job_succeeded" in names for names in claims[1:])


@pytest.mark.parametrize("db_url", ["postgres"], indirect=True)
async def test_a_pool_claims_before_its_buffer_runs_dry(db_url: str) -> None:
    """Fast handlers that never suspend: the pool refills at about half its depth, so no
    claim after the first takes the whole depth (one slot used to run the buffer dry before
    the producer saw the room: every claim then took all of it)."""
    groups = by_transaction(await drained_pool_history(db_url))
    leased = [names.count("job_leased") for names in groups if "job_leased" in names]
    assert len(leased) > 1
    assert max(leased[1:]) < CONCURRENCY + PREFETCH
