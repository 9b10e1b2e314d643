"""Retention on SQLite: finished jobs past their rule move to ``<db>.archive.db`` with every
event and view row, and every read of them stays what it was (decision 31)."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from uuid import UUID

from retention_helpers import PAST, invoke, make_jobs, reads_of

from ledger import FakeClock, Ledger
from ledger.core.events import Event
from ledger.core.retention import RETENTION_STREAM_ID, JobsArchived
from ledger.retention.retention_runs import HELD_BY_AUDIT, HELD_BY_HEAD, choose, policy_of, set_rule
from ledger.store.sqlite import archive as archive_files
from ledger.store.sqlite.archive import archive_path


def _ok(url: str, *args: str) -> str:
    result = invoke(url, *args)
    assert result.exit_code == 0, (args, result.stdout, result.stderr)
    return result.stdout


def test_archived_jobs_keep_their_history_audit_and_export(sqlite_url: str) -> None:
    """A run moves exactly the finished jobs past their rule (not the live ones, not the
    type whose own rule keeps it); their history, audit rows and export are unchanged, the
    hot tables no longer hold them, verify holds on hot and on hot + archive, and the
    policy and the batch are events in audit."""
    jobs = make_jobs(sqlite_url)
    before = {job_id: reads_of(sqlite_url, job_id) for job_id in jobs.finished}
    _ok(sqlite_url, "retention", "set", "--after", "30d")
    _ok(sqlite_url, "retention", "set", "--type", "slow", "--after", "5000w")

    run = json.loads(_ok(sqlite_url, "retention", "run", "--json"))

    assert run["moved"] == 5
    assert set(run["job_ids"]) == {str(j) for j in jobs.finished}
    assert (run["held"], run["changed"], run["batches"]) == (0, 0, 1)
    assert Path(archive_path(sqlite_url.removeprefix("sqlite:///"))).exists()
    for job_id in jobs.finished:
        assert reads_of(sqlite_url, job_id) == before[job_id]
        hot = json.loads(_ok(sqlite_url, "audit", "--job", str(job_id), "--json"))
        assert hot["rows"] == []
        assert invoke(sqlite_url, "show", str(job_id)).exit_code == 1  # gone from the hot view
    for job_id in (*jobs.live, *jobs.kept):
        assert invoke(sqlite_url, "show", str(job_id)).exit_code == 0
    _ok(sqlite_url, "projections", "verify")
    _ok(sqlite_url, "projections", "verify", "--include-archive")
    _ok(sqlite_url, "replay", "--check", "--all")
    _ok(sqlite_url, "projections", "rebuild", "--all")  # from the hot history: the same hot views
    _ok(sqlite_url, "projections", "verify", "--include-archive")
    rows = json.loads(_ok(sqlite_url, "audit", "--type", "retention", "--oldest", "--json"))
    assert [r["event"] for r in rows["rows"]] == [
        "retention_policy_set",
        "retention_policy_set",
        "jobs_archived",
    ]
    again = json.loads(_ok(sqlite_url, "retention", "run", "--json"))
    assert (again["moved"], again["eligible"]) == (0, 0)
    with Ledger.open(sqlite_url) as ledger:  # the live jobs still work
        [claimed] = ledger.claim("w2", limit=5)
        assert claimed.job_id == jobs.live[0]


def test_a_job_that_changed_after_it_was_chosen_stays_hot(sqlite_url: str) -> None:
    """A dead job requeued between the choice and the move is not moved (its archive copy
    is undone) while the others of its batch are (here every finished job: one rule)."""
    jobs = make_jobs(sqlite_url)
    clock = FakeClock(datetime_in_2026())
    with Ledger.open(sqlite_url, clock=clock) as ledger:
        set_rule(ledger.store, clock.now(), job_type=None, status=None, after_s=86_400)
        choice = choose(ledger.store, policy_of(ledger.store), clock.now())
        versions = {job.job_id: job.version for job in choice.eligible}
        dead = jobs.finished[3]
        ledger.requeue(dead)
        done = ledger.store.move_to_archive(versions, _batch_event(clock))
        assert done.changed == [dead]
        assert set(done.moved) == {*jobs.finished, *jobs.kept} - {dead}
        assert ledger.get(dead).status.value == "pending"
        sizes = ledger.store.table_sizes()
    assert sizes["archive.jl_queue"] == 5
    _ok(sqlite_url, "projections", "verify", "--include-archive")


def test_a_batch_another_run_moved_meanwhile_is_left_as_that_run_left_it(
    sqlite_url: str,
) -> None:
    """Two runs that chose the same jobs (two workers' services): the second moves nothing,
    records nothing and undoes none of the first's archive rows."""
    jobs = make_jobs(sqlite_url)
    before = reads_of(sqlite_url, jobs.finished[0])
    clock = FakeClock(datetime_in_2026())
    with Ledger.open(sqlite_url, clock=clock) as ledger:
        set_rule(ledger.store, clock.now(), job_type=None, status=None, after_s=86_400)
        choice = choose(ledger.store, policy_of(ledger.store), clock.now())
        versions = {job.job_id: job.version for job in choice.eligible}
        first = ledger.store.move_to_archive(versions, _batch_event(clock))
        head = ledger.store.head_position()
        second = ledger.store.move_to_archive(versions, _batch_event(clock))
        assert len(first.moved) == 6 and (second.moved, second.changed) == ([], [])
        assert ledger.store.head_position() == head
        assert ledger.store.table_sizes()["archive.jl_queue"] == 6
    assert reads_of(sqlite_url, jobs.finished[0]) == before
    _ok(sqlite_url, "projections", "verify", "--include-archive")


def test_a_move_interrupted_after_its_copy_reads_once_and_finishes(sqlite_url: str) -> None:
    """Rows copied to the archive whose hot delete never committed (a crash between the two
    transactions) are read once, the hot copy winning, and the next run completes the move."""
    jobs = make_jobs(sqlite_url)
    path = sqlite_url.removeprefix("sqlite:///")
    before = reads_of(sqlite_url, jobs.finished[0])
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("ATTACH DATABASE ? AS archive", (archive_path(path),))
    for statement in archive_files.create_statements():
        conn.execute(statement)
    ids = json.dumps([job_id.hex for job_id in jobs.finished])
    for statement in archive_files.copy_statements().values():
        conn.execute(statement, {"ids": ids})
    conn.close()

    assert reads_of(sqlite_url, jobs.finished[0]) == before
    _ok(sqlite_url, "projections", "verify", "--include-archive")
    _ok(sqlite_url, "retention", "set", "--after", "30d")
    run = json.loads(_ok(sqlite_url, "retention", "run", "--json"))
    assert run["moved"] == 6  # the five copied and the slow job (one rule for all here)
    assert reads_of(sqlite_url, jobs.finished[0]) == before
    _ok(sqlite_url, "projections", "verify", "--include-archive")


def test_jobs_wait_for_the_audit_view_and_for_the_newest_event(sqlite_url: str) -> None:
    """A finished job whose newest event the audit view has not applied is held, as is one
    holding the events table's newest id (its rowid would be handed out again); once the
    audit view catches up and a newer event exists, they move."""
    clock = FakeClock(PAST)
    with Ledger.open(sqlite_url, clock=clock) as ledger:
        ledger.define("t")
        set_rule(ledger.store, clock.now(), job_type=None, status=None, after_s=60)
        first, second = ledger.enqueue("t", {}).job_id, ledger.enqueue("t", {}).job_id
        ledger.cancel(first)
        ledger.catch_up()
        ledger.cancel(second)  # the newest event, and not yet in the audit view
        clock.advance(3600)
        choice = choose(ledger.store, policy_of(ledger.store), clock.now())
        held = {h.job.job_id: h.reason for h in choice.held}
        assert [j.job_id for j in choice.eligible] == [first]
        assert held == {second: HELD_BY_AUDIT}
        ledger.catch_up()
        choice = choose(ledger.store, policy_of(ledger.store), clock.now())
        assert {h.job.job_id: h.reason for h in choice.held} == {second: HELD_BY_HEAD}
        set_rule(ledger.store, clock.now(), job_type="t", status=None, after_s=60)
        ledger.catch_up()
        choice = choose(ledger.store, policy_of(ledger.store), clock.now())
        assert {j.job_id for j in choice.eligible} == {first, second}
        with ledger.store.read_snapshot() as tables:
            stream = tables.histories([RETENTION_STREAM_ID])[RETENTION_STREAM_ID]
        assert [r.event.name for r in stream] == ["retention_policy_set"] * 2


def datetime_in_2026() -> datetime:
    return datetime(2026, 6, 1, tzinfo=UTC)


def _batch_event(clock: FakeClock) -> Callable[[list[UUID], dict[str, int]], Event]:
    def event_for(job_ids: list[UUID], moved: dict[str, int]) -> Event:
        return JobsArchived(
            at=clock.now(), job_ids=job_ids, archive="test", moved=moved, policy_version=1,
            actor="test",
        )  # fmt: skip

    return event_for
