"""The tracked audit projection, its runner, ``stats`` and their CLI, on both backends."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest
from click.testing import CliRunner
from projection_helpers import as_uuid, populate, raw, reset_tracking

from jobledger_cli.main import cli
from ledger import Failure, FailureKind, FakeClock, Ledger
from ledger.core.events import JobEvent
from ledger.store.views import ViewTables
from ledger.views.catalog import AUDIT
from projections.tracked import TrackedRunner

COLUMNS = "position, job_id, job_type, org, event, worker_id, run_number, attempt, at"


def audit_rows(url: str) -> list[tuple[Any, ...]]:
    """Every audit row, by position, with job ids as ``UUID``s."""
    rows = raw(url, f"SELECT {COLUMNS} FROM jl_audit ORDER BY position")
    return [(r[0], as_uuid(r[1]), *r[2:]) for r in rows]


def tracking(url: str) -> int | None:
    rows = raw(url, "SELECT position FROM jl_tracking WHERE name = ?", ("audit",))
    return rows[0][0] if rows else None


def lease(job: Any) -> Any:
    assert job.lease is not None
    return job.lease


def job_events(ledger: Ledger) -> list[Any]:
    with ledger.store.read_snapshot() as tables:
        return [e for e in tables.events_after(0, 100_000) if isinstance(e.event, JobEvent)]


def test_catch_up_writes_one_row_per_job_event_with_its_columns(db_url: str) -> None:
    """After commands, catch-up writes exactly one audit row per job event (none for
    definition events), with type and org from the enqueue event, and records the head."""
    clock = FakeClock()
    with Ledger.open(db_url, clock=clock) as ledger:
        ledger.define("t")
        job_id = ledger.enqueue("t", {"x": 1}, org="acme").job_id
        assert job_id is not None
        [job] = ledger.claim("w1", lease_s=30)
        assert job.lease is not None
        clock.advance(2)
        ledger.succeed(job.lease)
        populate(db_url, clock)
        [report] = ledger.catch_up()
        head = ledger.store.head_position()
        events = job_events(ledger)
    assert report.position == head == tracking(db_url)
    rows = audit_rows(db_url)
    assert [r[0] for r in rows] == [e.position for e in events]
    assert report.applied == head  # every event, definitions included, was consumed
    t0 = int(clock.now().timestamp() * 1e6) - 2_000_000
    first = [r for r in rows if r[1] == job_id]
    assert [r[2:] for r in first] == [
        ("t", "acme", "job_enqueued", None, None, None, t0),
        ("t", "acme", "job_leased", "w1", 1, 1, t0),
        ("t", "acme", "job_succeeded", "w1", 1, 1, t0 + 2_000_000),
    ]
    by_job = {r[1]: r[2] for r in rows}
    assert set(by_job.values()) == {"t", "sync"}


def test_run_once_and_re_delivery_change_nothing(db_url: str) -> None:
    """``run_once`` applies one bounded batch; catching up again, re-applying a batch, or
    replaying from a reset position leaves the rows as they were."""
    populate(db_url)
    with Ledger.open(db_url) as ledger:
        runner = TrackedRunner(ledger.store)
        assert runner.run_once(5) == 5
        assert tracking(db_url) == 5
        runner.catch_up()
        rows = audit_rows(db_url)
        head = ledger.store.head_position()
        assert runner.catch_up().applied == 0
        with ledger.store.view_tables() as tables:
            batch = tables.events_after(10, 20)
            assert runner.apply(tables, batch) == 0
        assert audit_rows(db_url) == rows
        reset_tracking(db_url)
        assert TrackedRunner(ledger.store).catch_up().applied == head
    assert audit_rows(db_url) == rows
    assert tracking(db_url) == head


def test_a_failure_mid_batch_rolls_back_rows_and_position(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Rows and position commit together: a failure after the rows were written leaves
    neither; the next run applies the batch in full."""
    populate(db_url)

    def broken(self: ViewTables, name: str, position: int) -> None:
        raise RuntimeError("crash after the rows")

    with Ledger.open(db_url) as ledger:
        runner = TrackedRunner(ledger.store)
        with monkeypatch.context() as patch:
            patch.setattr(ViewTables, "set_tracking", broken)
            with pytest.raises(RuntimeError):
                runner.run_once(10)
        assert audit_rows(db_url) == []
        assert tracking(db_url) is None
        assert runner.run_once(10) == 10
        assert tracking(db_url) == 10
        assert len(audit_rows(db_url)) == len([e for e in job_events(ledger) if e.position <= 10])


def test_verify_and_rebuild_audit(db_url: str) -> None:
    """Verify compares audit at its position (clean before and after catch-up), names a
    corrupted row's column; rebuild restores it and records the head as its position."""
    populate(db_url)
    with Ledger.open(db_url) as ledger:
        rebuilder = ledger.projections()
        assert rebuilder.verify(["audit"]).clean
        ledger.catch_up(["audit"])
        report = rebuilder.verify(["audit"])
        assert report.clean, report
        [(position,)] = raw(db_url, "SELECT min(position) FROM jl_audit WHERE event = 'job_leased'")
        raw(db_url, "UPDATE jl_audit SET worker_id = 'zz' WHERE position = ?", (position,))
        raw(db_url, "DELETE FROM jl_audit WHERE position = (SELECT max(position) FROM jl_audit)")
        [view] = rebuilder.verify(["audit"]).views
        assert view.drift_count == 2
        kinds = {d.kind: d for d in view.drift}
        assert kinds["differs"].key == [position]
        assert [c.column for c in kinds["differs"].columns] == ["worker_id"]
        assert "missing" in kinds
        raw(db_url, "DELETE FROM jl_tracking")
        ledger.enqueue("t")
        rebuilt = rebuilder.rebuild(["audit"])
        assert rebuilt.rows == {"audit": len(job_events(ledger))}
        assert tracking(db_url) == ledger.store.head_position() == rebuilt.position
        assert rebuilder.verify().clean
        [status] = [s for s in rebuilder.status() if s.name == "audit"]
        assert (status.mode, status.lag) == ("tracked", 0)


def test_stats_on_a_constructed_history(db_url: str) -> None:
    """Counts by status and type, 5 min / 1 h windows, oldest due pending job and nearest-
    rank p50/p95 run times (lease → success of the same attempt) on a fake clock."""
    clock = FakeClock()
    terminal = Failure(kind=FailureKind.TERMINAL, code="bad", message="m")
    with Ledger.open(db_url, clock=clock) as ledger:
        ledger.define("a")
        ledger.define("b", max_attempts=1)
        ledger.enqueue("a", {"n": 1})
        ledger.enqueue("a", {"n": 2})
        ledger.enqueue("b")
        leases = {(j.job_type, j.payload.get("n")): lease(j) for j in ledger.claim("w", limit=3)}
        clock.advance(2)
        ledger.succeed(leases["a", 1])
        clock.advance(2)
        ledger.succeed(leases["a", 2])
        ledger.fail(leases["b", None], terminal)
        clock.advance(600)
        ledger.enqueue("a", {"n": 3})
        [third] = ledger.claim("w")
        clock.advance(10)
        ledger.succeed(lease(third))
        ledger.enqueue("a", {"n": 4})
        ledger.enqueue("a", {"n": 5}, delay_s=1000)  # pending, not due: not waiting
        clock.advance(30)
        assert ledger.stats(catch_up=False).audit_lag > 0
        stats = ledger.stats()
    assert stats.at == clock.now()
    assert stats.by_status == {"dead": 1, "pending": 2, "succeeded": 3}
    assert stats.by_type == {"a": {"pending": 2, "succeeded": 3}, "b": {"dead": 1}}
    assert [(w.seconds, w.succeeded, w.failed, w.dead) for w in stats.windows] == [
        (300, 1, 0, 0),
        (3600, 3, 1, 1),
    ]
    assert stats.oldest_pending_age_s == 30.0
    [run_time] = stats.run_times
    assert (run_time.job_type, run_time.count, run_time.p50_s, run_time.p95_s) == (
        "a",
        3,
        4.0,
        10.0,
    )
    assert stats.audit_lag == 0
    later = stats.at + timedelta(hours=2)
    with Ledger.open(db_url, clock=clock) as ledger:
        quiet = ledger.stats(later)
    assert [(w.succeeded, w.failed, w.dead) for w in quiet.windows] == [(0, 0, 0), (0, 0, 0)]
    assert quiet.run_times == []


def test_cli_status_catch_up_and_stats(db_url: str) -> None:
    """``projections status`` shows audit's lag; ``catch-up`` brings it to 0; ``stats
    --json`` prints the figures."""
    populate(db_url)

    def run(*args: str) -> Any:
        result = CliRunner().invoke(cli, ["--db", db_url, *args])
        assert result.exit_code == 0, result.output
        return result

    before = {s["name"]: s for s in json.loads(run("projections", "status", "--json").stdout)}
    assert before["audit"]["mode"] == "tracked"
    assert before["audit"]["position"] == 0
    assert before["audit"]["lag"] == before["queue"]["position"] > 0
    [line] = [x for x in run("projections", "status").stdout.splitlines() if x.startswith("audit")]
    assert line.split()[-2:] == ["0", str(before["queue"]["position"])]
    caught = run("projections", "catch-up", AUDIT.name)
    assert caught.stdout.startswith("audit: applied ")
    after = {s["name"]: s for s in json.loads(run("projections", "status", "--json").stdout)}
    assert after["audit"]["lag"] == 0
    figures = json.loads(run("stats", "--json").stdout)
    assert figures["by_status"]["succeeded"] == 5
    assert figures["audit_lag"] == 0
    assert [w["seconds"] for w in figures["windows"]] == [300, 3600]
    text = run("stats").stdout
    assert "audit position" in text and "5 min" in text
    assert json.loads(run("projections", "catch-up", "--json").stdout)[0]["applied"] == 0


def test_lag_reaches_zero_when_the_last_event_in_tail_order_is_not_the_newest(
    pg_url: str,
) -> None:
    """A transaction that took its id first and appended last puts its (newer) events before
    a later transaction's in tail order: once both are applied, the audit view's recorded
    position is the older id, below the head. The lag counts the events it has yet to
    apply, so it is 0 (it was ``head - position``: 1 for ever, and a follower test that
    waited for the position to reach the head stalled)."""
    import psycopg

    with Ledger.open(pg_url, auto_define=True) as ledger:
        with psycopg.connect(pg_url) as app:
            app.execute("SELECT pg_current_xact_id()")  # the app's transaction id comes first
            ledger.enqueue("t")  # committed by a later transaction, with the lower id
            ledger.using(app).enqueue("t")  # the newest id, from the older transaction
            app.commit()
        head = ledger.store.head_position()
        stats = ledger.stats()
        [status] = [s for s in ledger.projections().status() if s.name == AUDIT.name]
        assert stats.audit_position == status.position < head
        assert (stats.audit_lag, status.lag, ledger.audit_lag()) == (0, 0, 0)
        [(rows,)] = raw(pg_url, "SELECT count(*) FROM jl_audit")
        assert rows == 2
