"""Jobs of three past months on PostgreSQL (one of them past its rule, one kept by its own
rule, one live), for the tests of detached month partitions."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import NamedTuple
from uuid import UUID

from retention_helpers import BROKEN, invoke

from ledger import FakeClock, Ledger
from ledger.store.postgres.store import PostgresStore

JANUARY = datetime(2020, 1, 1, tzinfo=UTC)
FEBRUARY = datetime(2020, 2, 1, tzinfo=UTC)
MARCH = datetime(2020, 3, 1, tzinfo=UTC)


class MonthJobs(NamedTuple):
    finished: list[UUID]
    """January: two succeeded and a dead job of type ``t``, past a 30-day rule."""
    kept: UUID
    """February: a succeeded ``slow`` job, whose own rule keeps it (and so its month)."""
    live: UUID
    """March: a pending ``t`` job (its month holds a live job)."""


def ok(url: str, *args: str) -> str:
    """``jobledger --db url args…``'s stdout, which must have exited 0."""
    result = invoke(url, *args)
    assert result.exit_code == 0, (args, result.stdout, result.stderr)
    return result.stdout


def make_month_jobs(url: str, *, views_partitioned: bool = True) -> MonthJobs:
    """The 2020 partitions (every table's, or the events' only where the view tables are
    plain), then the jobs of January, February and March (see :class:`MonthJobs`); the
    audit view caught up."""
    clock = FakeClock(JANUARY)
    tables = ("jl_events", "jl_queue", "jl_audit", "jl_dead_letters")
    with Ledger.open(url, clock=clock) as ledger:
        assert isinstance(ledger.store, PostgresStore)
        made = ledger.store.ensure_partitions(JANUARY, ahead=2)
        assert made == [
            f"{table}_p2020{m:02d}"
            for m in (1, 2, 3)
            for table in (tables if views_partitioned else tables[:1])
        ]
        ledger.define("t", max_attempts=1)
        ledger.define("slow")
        finished = [ledger.enqueue("t", {"i": i}).job_id for i in range(3)]
        clock.advance(60)
        leases = {s.job_id: s.lease for s in ledger.claim("w1", limit=3)}
        for job_id in finished[:2]:
            lease = leases[job_id]
            assert lease is not None
            ledger.succeed(lease)
        dead = leases[finished[2]]
        assert dead is not None
        ledger.fail(dead, BROKEN)
        clock.set(FEBRUARY)
        kept = ledger.enqueue("slow", {}).job_id
        [slow] = ledger.claim("w1", limit=1)
        assert slow.lease is not None
        ledger.succeed(slow.lease)
        clock.set(MARCH)
        live = ledger.enqueue("t", {"i": 9}).job_id
        ledger.catch_up()
    return MonthJobs(finished, kept, live)
