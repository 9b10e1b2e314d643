"""Retention on PostgreSQL: a past month whose every job is past its rule is detached from the
events table into ``jl_archive`` with its jobs' view rows, and every read of them stays what
it was (decision 31). The partitioned layout is PostgreSQL's own, so these run there only."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from uuid import UUID

import psycopg
from month_jobs import JANUARY, make_month_jobs, ok
from retention_helpers import invoke, reads_of

from ledger import FakeClock, Ledger
from ledger.core.events import Event
from ledger.core.retention import JobsArchived
from ledger.retention.retention_runs import (
    choose,
    policy_events,
    policy_of,
    run_retention,
    set_rule,
)
from ledger.store.postgres import partitions


def _partitions(url: str) -> tuple[list[str], list[str]]:
    with psycopg.connect(url) as conn, conn.cursor(row_factory=psycopg.rows.dict_row) as cur:
        hot = [m.name for m in partitions.attached_months(cur)]
        return hot, partitions.archived_months(cur)


def test_a_past_month_of_finished_jobs_is_detached_and_reads_the_same(pg_url: str) -> None:
    """``show`` says which months move; a run detaches January (every job in it past its
    rule), not February (a job its own rule keeps) nor March (a live job); the moved jobs'
    history, audit and export are unchanged, the hot tables no longer hold them, verify
    holds on hot and on hot + archive, and the batch's event names the partition and its
    jobs."""
    jobs = make_month_jobs(pg_url)
    before = {job_id: reads_of(pg_url, job_id) for job_id in jobs.finished}
    ok(pg_url, "retention", "set", "--after", "30d")
    ok(pg_url, "retention", "set", "--type", "slow", "--after", "5000w")

    shown = json.loads(ok(pg_url, "retention", "show", "--json"))
    months = {u["partition"]: u for u in shown["partitions"]}
    assert months["jl_events_p202001"] == {
        "partition": "jl_events_p202001", "streams": 3, "eligible": 3, "moves": True
    }  # fmt: skip
    assert (months["jl_events_p202002"]["moves"], months["jl_events_p202003"]["moves"]) == (
        False,
        False,
    )

    run = json.loads(ok(pg_url, "retention", "run", "--json"))

    assert run["moved"] == 3 and run["archive"] == "jl_archive"
    assert set(run["job_ids"]) == {str(j) for j in jobs.finished}
    assert run["rows"]["jl_queue"] == 3 and run["rows"]["jl_dead_letters"] == 1
    hot, archived = _partitions(pg_url)
    assert "jl_events_p202001" in archived and "jl_events_p202001" not in hot
    assert {"jl_events_p202002", "jl_events_p202003"} <= set(hot)
    for job_id in jobs.finished:
        assert reads_of(pg_url, job_id) == before[job_id]
        audit = json.loads(ok(pg_url, "audit", "--job", str(job_id), "--json"))
        assert audit["rows"] == []
        assert invoke(pg_url, "show", str(job_id)).exit_code == 1  # gone from the hot view
    for job_id in (jobs.kept, jobs.live):
        assert invoke(pg_url, "show", str(job_id)).exit_code == 0
    ok(pg_url, "projections", "verify")
    ok(pg_url, "projections", "verify", "--include-archive")
    ok(pg_url, "replay", "--check", "--all")
    ok(pg_url, "projections", "rebuild", "--all")  # from the hot history: the same hot views
    ok(pg_url, "projections", "verify", "--include-archive")
    with Ledger.open(pg_url) as ledger:
        [batch] = [e for _, e in policy_events(ledger.store) if isinstance(e, JobsArchived)]
        sizes = ledger.store.table_sizes()
    assert batch.partition == "jl_events_p202001"
    assert set(batch.job_ids) == set(jobs.finished)
    assert sizes["jl_archive.jl_queue"] == 3
    assert sizes["jl_archive.jl_events"] == batch.moved["jl_events"] > 0
    again = json.loads(ok(pg_url, "retention", "run", "--json"))
    assert again["moved"] == 0
    with Ledger.open(pg_url) as ledger:  # the live job still works
        [claimed] = ledger.claim("w2", limit=5)
        assert claimed.job_id == jobs.live


def test_a_database_made_before_partitions_keeps_working_and_refuses_to_move(
    empty_pg_url: str,
) -> None:
    """An events table made unpartitioned (as before decision 31's partitions) stays so
    through ``init`` and ``migrate``; jobs enqueue and rules set as before, and ``retention
    run`` refuses with ``retention.unsupported`` saying how to convert."""
    with psycopg.connect(empty_pg_url, autocommit=True) as conn:
        conn.execute(
            "CREATE TABLE jl_events (originator_id uuid NOT NULL, originator_version bigint "
            "NOT NULL, topic text, state bytea, notification_id bigserial, "
            "PRIMARY KEY (originator_id, originator_version))"
        )
        conn.execute(
            "CREATE UNIQUE INDEX jl_events_notification_id_idx ON jl_events (notification_id)"
        )
    ok(empty_pg_url, "init")
    ok(empty_pg_url, "migrate")
    with Ledger.open(empty_pg_url, clock=FakeClock(JANUARY)) as ledger:
        ledger.define("t")
        ledger.enqueue("t", {})
    ok(empty_pg_url, "retention", "set", "--after", "1d")
    result = invoke(empty_pg_url, "retention", "run")
    assert result.exit_code == 1
    assert result.stderr.startswith("error: retention.unsupported")
    assert "predates partitions" in result.stderr
    dry = json.loads(ok(empty_pg_url, "retention", "run", "--dry-run", "--json"))
    assert dry["eligible"] == 0
    with psycopg.connect(empty_pg_url) as conn:
        [(kind,)] = conn.execute("SELECT relkind FROM pg_class WHERE relname = 'jl_events'")
    assert kind == "r"


def test_a_second_run_that_chose_the_same_month_moves_nothing(pg_url: str) -> None:
    """Two runs that chose the same jobs (two workers' services): the first detaches the
    month, the second finds it gone and appends no event; a month a job changed in after
    the choice stays hot."""
    jobs = make_month_jobs(pg_url)
    with Ledger.open(pg_url) as ledger:
        now = ledger.clock.now()
        set_rule(ledger.store, now, job_type=None, status=None, after_s=30 * 86_400)
        chosen = choose(ledger.store, policy_of(ledger.store), now).eligible
        versions = {job.job_id: job.version for job in chosen}
        stale = {job_id: version - 1 for job_id, version in versions.items()}
        first_try = ledger.store.move_to_archive(stale, _event, now=now)
        assert first_try.moved == []  # January's jobs are not at those versions
        first = ledger.store.move_to_archive(versions, _event, now=now)
        second = ledger.store.move_to_archive(versions, _event, now=now)
        batches = [e for _, e in policy_events(ledger.store) if isinstance(e, JobsArchived)]
    assert set(first.moved) == set(jobs.finished) | {jobs.kept}
    assert second.moved == []
    assert [b.partition for b in batches] == ["jl_events_p202001", "jl_events_p202002"]


def _event(job_ids: list[UUID], moved: dict[str, int]) -> Event:
    return JobsArchived(
        at=JANUARY, job_ids=job_ids, archive="jl_archive", moved=moved, policy_version=1,
        actor="test",
    )  # fmt: skip


def test_every_run_makes_the_coming_months_partitions(pg_url: str) -> None:
    """A run with nothing to move still makes the partitions of its month and the next
    three, so the jobs enqueued then find theirs; a dry run makes none."""
    later = datetime(2030, 1, 15, tzinfo=UTC)
    with Ledger.open(pg_url) as ledger:
        run_retention(ledger.store, later, dry_run=True)
        assert not any(m.startswith("jl_events_p2030") for m in _partitions(pg_url)[0])
        done = run_retention(ledger.store, later)
    assert done.moved == 0
    hot, _ = _partitions(pg_url)
    assert [m for m in hot if m.startswith("jl_events_p2030")] == [
        f"jl_events_p2030{m:02d}" for m in (1, 2, 3, 4)
    ]
