"""In-lease reports leave the job's row behind; every reader catches it up (PostgreSQL).

The pool's one-statement write appends a handler's start (and any in-lease report whose fold
changes no filtered column) without rewriting the job's row (:mod:`ledger.views.queue_lag`).
These pin that the row is then behind by exactly those events, that every answer is still
the stream's (reads, listings, a unit of work's decisions, verify), that the next write of the
row catches it up, and that a drift in a lagging row's exact columns still shows in verify.
"""

from __future__ import annotations

from collections.abc import Iterator
from uuid import UUID

import psycopg
import pytest

from ledger import FakeClock, JobStatus, Ledger
from ledger.core.state import JobState
from ledger.core.values import Stage
from ledger.jobs.outcomes import Completion
from tests.contract.test_start_claimed import claimed


@pytest.fixture
def pg(pg_url: str, clock: FakeClock) -> Iterator[Ledger]:
    with Ledger.open(pg_url, clock=clock) as opened:
        opened.define("t")
        yield opened


def row_version(pg_url: str, job_id: UUID) -> tuple[int, str, str]:
    """The job's row as stored: its version, status and stage."""
    with psycopg.connect(pg_url) as conn:
        [row] = conn.execute(
            "SELECT version, status, stage FROM jl_queue WHERE job_id = %s", [job_id]
        ).fetchall()
    return row


def stream_version(ledger: Ledger, job_id: UUID) -> int:
    return len(ledger.history(job_id))


def started(ledger: Ledger, pg_url: str, n: int = 1) -> list[JobState]:
    """Jobs claimed, then started by the pool's write: their rows left at the claim's."""
    jobs = claimed(ledger, n)
    result = ledger.start_claimed(jobs)
    assert not result.rejected
    after = {state.job_id: state for state in result.accepted}
    for job in jobs:
        assert after[job.job_id].version == job.version + 1
        assert row_version(pg_url, job.job_id) == (job.version, "leased", Stage.CLAIMED)
    return [after[job.job_id] for job in jobs]


def test_a_start_appends_its_event_and_leaves_the_row_at_the_claim(pg: Ledger, pg_url: str) -> None:
    [job] = started(pg, pg_url)
    assert stream_version(pg, job.job_id) == job.version
    # Every read answers with the stream, not the row.
    got = pg.get(job.job_id)
    assert got is not None and got.stage == Stage.RUNNING and got.version == job.version
    [listed] = [j for j in pg.jobs().jobs if j.state.job_id == job.job_id]
    assert listed.state == got
    assert pg.projections().verify().clean


def test_the_outcome_catches_the_row_up(pg: Ledger, pg_url: str) -> None:
    [job] = started(pg, pg_url)
    assert job.lease is not None
    result = pg.finish_claimed([(job, Completion(job.lease))])
    [done] = result.accepted
    assert done.status is JobStatus.SUCCEEDED and done.version == job.version + 1
    assert row_version(pg_url, job.job_id) == (done.version, "succeeded", done.stage)
    assert stream_version(pg, job.job_id) == done.version
    assert pg.projections().verify().clean


def test_a_unit_of_work_decides_on_the_caught_up_state(
    pg: Ledger, pg_url: str, clock: FakeClock
) -> None:
    """A heartbeat locks the row, folds the start on and appends after it (no clash with
    the start's version), then writes the row at the head."""
    [job] = started(pg, pg_url)
    assert job.lease is not None
    clock.advance(5)
    beat = pg.heartbeat(job.lease, lease_s=60)
    assert beat.version == job.version + 1
    assert beat.stage == Stage.RUNNING and beat.started_at == job.started_at
    assert row_version(pg_url, job.job_id) == (beat.version, "leased", Stage.RUNNING)
    assert pg.projections().verify().clean


def test_a_boot_reap_sees_the_start_its_row_does_not_hold(pg: Ledger, pg_url: str) -> None:
    """The boot reap reads the rows (stage ``claimed`` in both) but decides on the folded
    states: the started claim is failed as a lost attempt, the other released."""
    [job] = started(pg, pg_url)
    [unstarted] = claimed(pg, 1)
    done = pg.boot_reap("w", alive=lambda worker_id: False)
    assert [s.job_id for s in done.lost] == [job.job_id]
    assert [s.job_id for s in done.released] == [unstarted.job_id]
    [lost] = done.lost
    assert lost.last_error is not None and lost.last_error.code == "job.worker_lost"
    assert row_version(pg_url, job.job_id)[0] == stream_version(pg, job.job_id) == lost.version
    assert pg.projections().verify().clean


def test_a_stale_known_state_writes_nothing_and_is_decided_again(pg: Ledger, pg_url: str) -> None:
    """The pool's write from the claim's state after the start was already recorded: the
    stream is past the expected version though the row is not, so nothing is written by the
    statement, and the stored state (running already) decides that there is nothing to do."""
    [job] = claimed(pg, 1)
    first = pg.start_claimed([job])
    second = pg.start_claimed([job])
    assert [s.job_id for s in first.accepted] == [job.job_id]
    assert not second.accepted and not second.rejected
    assert stream_version(pg, job.job_id) == job.version + 1
    assert pg.projections().verify().clean


def test_verify_still_sees_a_drift_in_a_lagging_rows_exact_columns(pg: Ledger, pg_url: str) -> None:
    """A lagging row is rolled forward in its lagging columns only: a wrong priority (an
    exact column) is still reported, a stage behind (a lagging one) is not."""
    [job] = started(pg, pg_url)
    assert pg.projections().verify().clean
    with psycopg.connect(pg_url) as conn:
        conn.execute("UPDATE jl_queue SET priority = 99 WHERE job_id = %s", [job.job_id])
    report = pg.projections().verify()
    [queue] = [view for view in report.views if view.name == "queue"]
    assert queue.drift_count == 1
    [drift] = queue.drift
    assert [c.column for c in drift.columns] == ["priority"]
