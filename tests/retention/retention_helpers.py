"""Helpers for the retention tests: a ledger with finished, live and long-kept jobs made in
the past by a fake clock (so the CLI's real clock finds them old), and the reads whose output
must not change when the jobs move to the archive."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import NamedTuple
from uuid import UUID

from click.testing import CliRunner, Result

from jobledger_cli.main import cli
from ledger import FakeClock, Ledger
from ledger.core.values import Failure, FailureKind

PAST = datetime(2020, 1, 1, tzinfo=UTC)
BROKEN = Failure(FailureKind.TERMINAL, "app.broken", "no")


def invoke(url: str, *args: str) -> Result:
    """Run ``jobledger --db url args…`` in-process; stdout and stderr kept apart."""
    return CliRunner().invoke(cli, ["--db", url, *args])


class Jobs(NamedTuple):
    finished: list[UUID]
    """Succeeded, dead and cancelled jobs of type ``t``: past a 30-day rule."""
    live: list[UUID]
    """A pending and a leased job of type ``t``."""
    kept: list[UUID]
    """A succeeded job of type ``slow``, whose own rule keeps it."""
    leased_by: str


def make_jobs(url: str) -> Jobs:
    """Three succeeded, one dead, one cancelled, one pending and one leased job of type
    ``t`` and a succeeded ``slow`` job, all in 2020; the audit view caught up."""
    clock = FakeClock(PAST)
    with Ledger.open(url, clock=clock) as ledger:
        ledger.define("t", max_attempts=1)
        ledger.define("slow")
        t = [ledger.enqueue("t", {"i": i}).job_id for i in range(7)]
        slow = ledger.enqueue("slow", {}).job_id
        clock.advance(60)
        ledger.cancel(t[4])
        leased = {s.job_id: s for s in ledger.claim("w1", limit=10, lease_s=600)}
        for job_id in (*t[:3], slow):
            lease = leased[job_id].lease
            assert lease is not None
            ledger.succeed(lease)
        dead_lease = leased[t[3]].lease
        assert dead_lease is not None
        ledger.fail(dead_lease, BROKEN)
        released = leased[t[5]].lease
        assert released is not None
        ledger.release(released)  # back to pending
        ledger.catch_up()
    return Jobs(finished=t[:5], live=[t[5], t[6]], kept=[slow], leased_by="w1")


def reads_of(url: str, job_id: UUID) -> dict[str, str]:
    """What `history`, `audit --include-archive` and `export` print of one job."""
    job = str(job_id)
    outputs = {
        "history": invoke(url, "history", job, "--json"),
        "audit": invoke(url, "audit", "--job", job, "--oldest", "--json", "--include-archive"),
        "export": invoke(url, "export", job),
    }
    for name, result in outputs.items():
        assert result.exit_code == 0, (name, result.stdout, result.stderr)
    return {name: result.stdout for name, result in outputs.items()}
