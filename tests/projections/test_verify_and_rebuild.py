"""Verify and rebuild of every inline view, on both backends."""

from __future__ import annotations

import logging
from uuid import UUID

import pytest
from projection_helpers import as_uuid, populate, raw

from ledger import Ledger
from ledger.store.shadow_ddl import index_names, projection_schema
from ledger.views.catalog import BY_NAME, PROJECTIONS, version_key
from ledger.views.rows_from_history import Replay

# (view, corruption, the key column to look up, the column the report must name or None)
CORRUPTIONS = [
    ("queue", "UPDATE jl_queue SET priority = priority + 7 WHERE job_id = ?", "priority"),
    ("queue", "UPDATE jl_queue SET status = 'leased' WHERE job_id = ?", "status"),
    ("queue", "DELETE FROM jl_queue WHERE job_id = ?", None),
    ("definitions", "UPDATE jl_definitions SET stream_version = 9 WHERE job_type = ?", None),
    ("sync_state", "UPDATE jl_sync_state SET revision = 'zz' WHERE uri = ?", "revision"),
    ("sync_state", "DELETE FROM jl_sync_state WHERE uri = ?", None),
    ("dead_letters", "UPDATE jl_dead_letters SET attempt = 42 WHERE job_id = ?", "attempt"),
    ("dead_letters", "DELETE FROM jl_dead_letters WHERE job_id = ?", None),
]
FIRST_KEY = {
    "queue": "SELECT job_id FROM jl_queue ORDER BY enqueue_seq LIMIT 1",
    "definitions": "SELECT job_type FROM jl_definitions ORDER BY job_type LIMIT 1",
    "sync_state": "SELECT uri FROM jl_sync_state ORDER BY uri LIMIT 1",
    "dead_letters": "SELECT job_id FROM jl_dead_letters ORDER BY dead_at LIMIT 1",
}


def _names(url: str, kind: str, table: str | None = None) -> set[str]:
    """Index (or table) names on either backend, optionally of one table."""
    if url.startswith("postgresql"):
        if kind == "table":
            query = "SELECT tablename FROM pg_tables WHERE schemaname = 'public'"
        else:
            query = "SELECT indexname FROM pg_indexes WHERE tablename = ?"
    else:
        query = "SELECT name FROM sqlite_master WHERE type = ?" + (
            " AND tbl_name = ?" if table else ""
        )
        return {row[0] for row in raw(url, query, (kind, table) if table else (kind,))}
    return {row[0] for row in raw(url, query, (table,) if kind == "index" else ())}


def test_a_populated_ledger_verifies_clean(db_url: str) -> None:
    """Every view of a ledger written only through the API equals its replay."""
    populate(db_url)
    with Ledger.open(db_url) as ledger:
        report = ledger.projections().verify()
    assert report.clean, report
    assert {v.name: v.expected_rows for v in report.views} == {
        "queue": 12,
        "definitions": 2,
        "workflow_runs": 0,
        "workflow_steps": 0,
        "tokens": 0,
        "schedules": 0,
        "source_polls": 0,
        "queue_states": 0,
        "sync_state": 2,
        "dead_letters": 2,
        "rate_buckets": 0,
        "audit": 0,  # tracked, not caught up: compared at its position (0)
    }


@pytest.mark.parametrize(("view", "corruption", "column"), CORRUPTIONS)
def test_verify_names_a_corrupted_row_and_rebuild_restores_it(
    db_url: str, view: str, corruption: str, column: str | None
) -> None:
    """A row changed or deleted behind the ledger's back is reported by key (and column);
    rebuilding that view restores it and verify is clean again."""
    populate(db_url)
    [(key,)] = raw(db_url, FIRST_KEY[view])
    before = sorted(raw(db_url, f"SELECT * FROM jl_{view}"), key=repr)
    raw(db_url, corruption, (key,))
    with Ledger.open(db_url) as ledger:
        report = ledger.projections().verify()
        assert not report.clean
        [drifting] = [v for v in report.views if not v.clean]
        assert drifting.name == view
        [drift] = drifting.drift
        shown = str(as_uuid(key)) if view in ("queue", "dead_letters") else key
        assert shown in [str(part) for part in drift.key]
        if corruption.startswith("DELETE"):
            assert drift.kind == "missing"
        else:
            assert drift.kind == "differs"
            if column is not None:
                assert column in [c.column for c in drift.columns]
        ledger.projections().rebuild([view])
        assert ledger.projections().verify().clean
    assert sorted(raw(db_url, f"SELECT * FROM jl_{view}"), key=repr) == before


def test_an_extra_row_is_reported(db_url: str) -> None:
    """A row the history does not explain is reported as extra."""
    populate(db_url)
    raw(
        db_url,
        "INSERT INTO jl_sync_state (source_id, uri, revision, content_hash, last_seen_at,"
        " last_ingested_at) VALUES ('ghost', 'x', NULL, NULL, 1, 1)",
    )
    with Ledger.open(db_url) as ledger:
        [view] = ledger.projections().verify(["sync_state"]).views
    assert [(d.kind, d.key) for d in view.drift] == [("extra", ["ghost", "x"])]


def test_rebuild_all_keeps_every_index_and_constraint(db_url: str) -> None:
    """After a rebuild the live tables carry their declared indexes under their proper names,
    no shadow or old table is left, and the unique indexes still hold."""
    populate(db_url)
    backend = "postgres" if db_url.startswith("postgresql") else "sqlite"
    before = {p.table: _names(db_url, "index", p.table) for p in PROJECTIONS}
    with Ledger.open(db_url) as ledger:
        report = ledger.projections().rebuild()
        assert report.rows == {
            "queue": 12,
            "definitions": 2,
            "workflow_runs": 0,
            "workflow_steps": 0,
            "tokens": 0,
            "schedules": 0,
            "source_polls": 0,
            "queue_states": 0,
            "sync_state": 2,
            "dead_letters": 2,
            "rate_buckets": 0,
            "audit": 35,
        }
        after = {p.table: _names(db_url, "index", p.table) for p in PROJECTIONS}
        assert after == before
        for p in PROJECTIONS:
            assert set(index_names(projection_schema(backend, p)[1])) <= after[p.table]
        assert not any("__" in name for name in _names(db_url, "table"))
        # The unique idempotency index still answers: the same key returns the same job.
        [(job_id,)] = raw(db_url, "SELECT job_id FROM jl_queue WHERE idempotency_key = 'k1'")
        assert ledger.enqueue("t", {"i": 1}, idempotency_key="k1").job_id == as_uuid(job_id)
        assert ledger.projections().verify().clean


def test_replaying_the_same_events_again_changes_nothing(db_url: str) -> None:
    """Re-delivered events (already applied positions) leave every expected row as it was."""
    populate(db_url)
    with Ledger.open(db_url) as ledger, ledger.store.read_snapshot() as tables:
        events = tables.events_after(0, 10_000)
    replay = Replay()
    replay.apply(events)
    rows = {p.name: list(replay.rows(p.name)) for p in PROJECTIONS}
    assert replay.apply(events) == 0
    assert replay.apply(events[len(events) // 2 :]) == 0
    assert {p.name: list(replay.rows(p.name)) for p in PROJECTIONS} == rows
    # Overlapping pages (a re-read batch) fold to the same rows as one pass.
    paged = Replay()
    paged.apply(events[:20])
    paged.apply(events[10:])
    assert {p.name: list(paged.rows(p.name)) for p in PROJECTIONS} == rows


def test_status_reports_versions_and_a_stale_projection_is_rebuilt_on_init(
    db_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A recorded version unlike the code's is stale; opening with create rebuilds it (and
    logs so), records the code's version, and restores its rows."""
    populate(db_url)
    with Ledger.open(db_url) as ledger:
        assert all(
            not s.stale and s.recorded_version == s.code_version
            for s in ledger.projections().status()
        )
    raw(db_url, "UPDATE jl_meta SET value = '0' WHERE key = ?", (version_key("dead_letters"),))
    raw(db_url, "DELETE FROM jl_dead_letters")
    with Ledger.open(db_url) as ledger:
        statuses = {s.name: s for s in ledger.projections().status()}
        assert statuses["dead_letters"].stale
        assert statuses["dead_letters"].recorded_version == 0
        assert not statuses["queue"].stale
        assert statuses["queue"].lag == 0
        assert statuses["queue"].position == ledger.store.head_position()
    with caplog.at_level(logging.WARNING), Ledger.open(db_url, create=True) as ledger:
        assert ledger.rebuilt == ["dead_letters"]
        assert not any(s.stale for s in ledger.projections().status())
        assert ledger.projections().verify().clean
        assert len(ledger.dead_letters()) == 2
    assert "rebuilding stale projections: dead_letters" in caplog.text


def test_a_missing_version_is_recorded_by_init_without_a_rebuild(db_url: str) -> None:
    """A database from before versions were recorded is taken as current: init records it."""
    raw(db_url, "DELETE FROM jl_meta WHERE key LIKE ?", ("projection:%",))
    with Ledger.open(db_url) as ledger:
        assert all(
            s.recorded_version is None and not s.stale for s in ledger.projections().status()
        )
    with Ledger.open(db_url, create=True) as ledger:
        assert ledger.rebuilt == []
        assert all(s.recorded_version == s.code_version for s in ledger.projections().status())


def test_unknown_projection_names_are_refused(db_url: str) -> None:
    """Naming a projection that does not exist raises KeyError naming the known ones."""
    with Ledger.open(db_url) as ledger, pytest.raises(KeyError, match="known: queue"):
        ledger.projections().verify(["nope"])


def test_uuid_keys_compare_as_uuids(db_url: str) -> None:
    """Live job ids (text on SQLite, uuid on PostgreSQL) are read back as UUIDs."""
    populate(db_url)
    with Ledger.open(db_url) as ledger, ledger.store.read_snapshot() as tables:
        [projection] = [p for p in PROJECTIONS if p.name == "queue"]
        assert all(isinstance(row["job_id"], UUID) for row in tables.live_rows(projection))


def test_each_projection_changes_only_on_the_events_it_declares(db_url: str) -> None:
    """The catalogue's ``events`` are the truth: replaying a real history one event at a
    time, a projection's rows change only on an event it declares — and each declared event
    of the narrow projections does change them somewhere in this history."""
    populate(db_url)
    with Ledger.open(db_url) as ledger:
        [dead] = [d.job_id for d in ledger.dead_letters() if d.snapshot.subject is None]
        ledger.requeue(dead)
        with ledger.store.read_snapshot() as tables:
            events = tables.events_after(0, 100_000)
    replay = Replay()
    changed_by: dict[str, set[str]] = {p.name: set() for p in PROJECTIONS}
    for item in events:
        replay.apply([item])
        for projection in PROJECTIONS:
            if replay.take_dirty(projection.name):
                assert item.event.name in projection.events, (projection.name, item.event.name)
                changed_by[projection.name].add(item.event.name)
    for name in ("definitions", "sync_state", "dead_letters"):
        assert changed_by[name] == set(BY_NAME[name].events), name
