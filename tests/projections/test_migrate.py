"""``jobledger migrate``: stale projections rebuilt, missing tables and indexes created."""

from __future__ import annotations

import json
from pathlib import Path

import msgspec
import pytest
from click.testing import CliRunner
from projection_helpers import as_uuid, populate, raw

from jobledger_cli.main import cli
from ledger import FakeClock, JobStatus, Ledger
from ledger.core.errors import DatabaseNotInitialisedError
from ledger.views.catalog import version_key
from ledger.views.queue import decode_state

LEASED_T = "SELECT job_id FROM jl_queue WHERE status = 'leased' AND job_type = 't'"


def run(url: str, *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, ["--db", url, "migrate", *args])
    return result.exit_code, result.stdout, result.stderr


def index_exists(url: str, name: str) -> bool:
    if url.startswith("postgresql"):
        return bool(raw(url, "SELECT 1 FROM pg_indexes WHERE indexname = ?", (name,)))
    return bool(raw(url, "SELECT 1 FROM sqlite_master WHERE type = 'index' AND name = ?", (name,)))


def test_migrate_rebuilds_a_stale_projection_and_says_so(db_url: str) -> None:
    """A stale view (its rows gone, an older version recorded): --dry-run names it and changes
    nothing; migrate rebuilds it from the history and records the code's version; running it
    again finds nothing to do."""
    populate(db_url)
    raw(db_url, "UPDATE jl_meta SET value = '0' WHERE key = ?", (version_key("dead_letters"),))
    raw(db_url, "DELETE FROM jl_dead_letters")

    code, out, _ = run(db_url, "--dry-run")
    assert code == 0
    assert out == "would rebuild dead_letters (recorded v0, code v1)\n"
    assert raw(db_url, "SELECT count(*) FROM jl_dead_letters") == [(0,)]

    code, out, _ = run(db_url)
    assert code == 0
    assert out.splitlines()[0] == "rebuilt dead_letters (recorded v0, code v1)"
    assert out.splitlines()[-1].startswith("migrated ")
    with Ledger.open(db_url) as ledger:
        assert len(ledger.dead_letters()) == 2
        assert not any(s.stale for s in ledger.projections().status())
        assert ledger.projections().verify().clean

    code, out, _ = run(db_url)
    assert code == 0
    assert out.endswith("is up to date\n")


def test_migrate_recreates_a_missing_index_and_reports_json(db_url: str) -> None:
    """An index dropped by hand comes back; --json reports the plan and what was done."""
    raw(db_url, "DROP INDEX jl_audit_type_idx")
    assert not index_exists(db_url, "jl_audit_type_idx")
    code, out, _ = run(db_url, "--json")
    assert code == 0
    report = json.loads(out)
    assert report["rebuilt"] == []
    assert report["created_tables"] == []
    assert report["plan"]["stale_names"] == []
    assert report["plan"]["missing_indexes"] == ["jl_audit_type_idx"]
    assert index_exists(db_url, "jl_audit_type_idx")


def test_a_missing_index_is_planned_and_init_creates_it(db_url: str) -> None:
    """An index a release added (here: dropped) is in the plan, so an up-to-date-looking
    ledger is not up to date: --dry-run names it, init creates it, and the claim that relies
    on it (SQLite names it: INDEXED BY) works; then the plan is empty."""
    with Ledger.open(db_url) as ledger:
        ledger.define("t")
        ledger.enqueue("t", queue="a")
    raw(db_url, "DROP INDEX jl_queue_claim_queue_idx")
    code, out, _ = run(db_url, "--dry-run")
    assert (code, out) == (0, "would create index jl_queue_claim_queue_idx\n")
    assert not index_exists(db_url, "jl_queue_claim_queue_idx")
    result = CliRunner().invoke(cli, ["--db", db_url, "init"])
    assert result.exit_code == 0, result.output
    assert index_exists(db_url, "jl_queue_claim_queue_idx")
    with Ledger.open(db_url) as ledger:
        [job] = ledger.claim("w", queues=["a"])
        assert job.queue == "a"
    code, out, _ = run(db_url)
    assert code == 0 and out.endswith("is up to date\n")


def test_a_ledger_lacking_a_new_index_is_refused_until_migrated(db_url: str) -> None:
    """Opening an existing ledger (what a worker does) that lacks an index this release added
    is refused with the migrate hint, not left to fail every claim (SQLite names the fair
    claim's index: INDEXED BY); after migrate the claim works."""
    with Ledger.open(db_url) as ledger:
        ledger.define("t")
        ledger.enqueue("t")
    raw(db_url, "DROP INDEX jl_queue_claim_org_idx")
    with pytest.raises(DatabaseNotInitialisedError, match=r"jl_queue_claim_org_idx.*migrate"):
        Ledger.open(db_url)
    code, _, _ = run(db_url)
    assert code == 0
    with Ledger.open(db_url) as ledger:
        [job] = ledger.claim("w")
        assert job.job_type == "t"


def test_migrate_refuses_a_database_without_a_ledger(tmp_path: Path, empty_pg_url: str) -> None:
    """Unlike init, migrate never creates a ledger: a missing SQLite file and an empty
    PostgreSQL database are refused with exit 1 and a hint."""
    missing = tmp_path / "absent.db"
    code, _, err = run(str(missing))
    assert code == 1
    assert not missing.exists()
    code, _, err = run(empty_pg_url)
    assert code == 1
    assert "run `jobledger init` first" in err


def test_migrate_packs_the_state_blobs_of_a_version_1_queue_view(db_url: str) -> None:
    """A queue view of version 1 (map-form state blobs): the ledger still reads and writes it,
    migrate rebuilds it with packed blobs, and verify is clean before and after."""
    clock = FakeClock()
    populate(db_url, clock)
    as_map = [
        (msgspec.msgpack.encode(decode_state(bytes(blob))), key)
        for key, blob in raw(db_url, "SELECT job_id, state FROM jl_queue")
    ]
    for blob, key in as_map:
        raw(db_url, "UPDATE jl_queue SET state = ? WHERE job_id = ?", (blob, key))
    raw(db_url, "UPDATE jl_meta SET value = '1' WHERE key = ?", (version_key("queue"),))
    leased = [as_uuid(key) for (key,) in raw(db_url, LEASED_T)]
    with Ledger.open(db_url, clock=clock) as ledger:
        assert ledger.projections().verify().clean
        old = ledger.get(leased[0])
        assert old is not None and old.lease is not None
        assert ledger.succeed(old.lease).status is JobStatus.SUCCEEDED
        ledger.enqueue("t", {"after": True})
        assert len(ledger.claim("w", types=["t"], limit=10)) == 1

    code, out, _ = run(db_url)
    assert code == 0
    assert out.splitlines()[0] == "rebuilt queue (recorded v1, code v2)"
    blobs = [bytes(blob) for (blob,) in raw(db_url, "SELECT state FROM jl_queue")]
    assert len(blobs) == len(as_map) + 1
    assert all(0x90 <= blob[0] <= 0x9F or blob[0] in (0xDC, 0xDD) for blob in blobs)
    with Ledger.open(db_url) as ledger:
        assert ledger.projections().verify().clean


def test_an_unmigrated_database_is_refused_at_open_not_at_its_first_tail_read(
    pg_url: str,
) -> None:
    """A database that lacks a column this release added used to open, take appends and then
    fail every tail read ("column transaction_id does not exist"): opening it without
    ``create`` (a worker, ``audit``) now refuses and names ``migrate``, and nothing is
    written; after ``migrate`` the same opens work."""
    populate(pg_url)
    raw(pg_url, "DROP INDEX jl_events_transaction_idx")
    raw(pg_url, "ALTER TABLE jl_events DROP COLUMN transaction_id")
    [(events,)] = raw(pg_url, "SELECT count(*) FROM jl_events")

    with pytest.raises(DatabaseNotInitialisedError, match="run `jobledger migrate`") as refused:
        Ledger.open(pg_url)
    assert "jl_events.transaction_id" in str(refused.value)
    result = CliRunner().invoke(cli, ["--db", pg_url, "audit"])
    assert result.exit_code != 0
    assert "jobledger migrate" in result.stderr, result.stderr
    assert raw(pg_url, "SELECT count(*) FROM jl_events") == [(events,)]

    code, out, _ = run(pg_url)
    assert code == 0 and "added column jl_events.transaction_id" in out, out
    with Ledger.open(pg_url) as ledger:
        ledger.enqueue("t", {"after": "migrate"})
        [report] = ledger.catch_up()
        assert report.applied == events + 1
        assert ledger.projections().verify().clean


def test_migrate_adds_transaction_ids_to_a_locked_era_history(pg_url: str) -> None:
    """A database from before events recorded their transaction (no column, no index):
    migrate plans the index, adds both columns without touching the events (0 for the old
    ones, whose ids committed in order under the table lock), keeps the audit's position, and
    new events then get real transaction ids and are read on from there, none twice."""
    populate(pg_url)
    with Ledger.open(pg_url) as ledger:
        ledger.catch_up()
    audit_before = raw(pg_url, "SELECT count(*) FROM jl_audit")
    raw(pg_url, "DROP INDEX jl_events_transaction_idx")
    raw(pg_url, "ALTER TABLE jl_events DROP COLUMN transaction_id")
    raw(pg_url, "ALTER TABLE jl_tracking DROP COLUMN transaction_id")
    [(head,)] = raw(pg_url, "SELECT max(notification_id) FROM jl_events")

    code, out, _ = run(pg_url, "--dry-run")
    assert code == 0 and "jl_events_transaction_idx" in out, out
    assert "would add column jl_events.transaction_id" in out, out
    assert "would add column jl_tracking.transaction_id" in out, out
    code, out, _ = run(pg_url)
    assert code == 0, out
    assert index_exists(pg_url, "jl_events_transaction_idx")
    assert raw(pg_url, "SELECT DISTINCT transaction_id::text FROM jl_events") == [("0",)]
    assert raw(pg_url, "SELECT position, transaction_id::text FROM jl_tracking") == [(head, "0")]

    with Ledger.open(pg_url) as ledger:
        ledger.enqueue("t", {"after": "migrate"})
        [report] = ledger.catch_up()
    assert report.applied == 1
    [(newest,)] = raw(
        pg_url, "SELECT transaction_id::text FROM jl_events WHERE notification_id > ?", (head,)
    )
    assert int(newest) > 0
    assert raw(pg_url, "SELECT count(*) FROM jl_audit") == [(audit_before[0][0] + 1,)]
    with Ledger.open(pg_url) as ledger:
        assert ledger.projections().verify().clean
