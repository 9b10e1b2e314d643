"""Export -> import -> export on real databases: byte-identical, and the target agrees."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import msgspec
import pytest
from exchange_files import parts
from exchange_helpers import build, export_bytes, head, invoke

from ledger import FakeClock, JobStatus, Ledger
from ledger.store import exporter, importer


def _import(target: str, data: bytes, *args: str) -> str:
    result = invoke(target, "import", "-", *args, stdin=data)
    assert result.exit_code == 0, result.stderr
    return result.stderr


def test_round_trip_is_byte_identical_and_target_agrees(
    db_url: str, target_url: str, clock: FakeClock
) -> None:
    """Export, import into an empty ledger on either backend, export again: the same bytes;
    states, dead letters, sync state, definitions and every view agree with the source."""
    jobs = build(db_url, clock)
    data = export_bytes(db_url)
    summary = _import(target_url, data)
    assert "imported 8 jobs (" in summary and "with 2 job-type definitions" in summary
    assert export_bytes(target_url) == data
    with Ledger.open(db_url) as source, Ledger.open(target_url) as target:
        assert target.get_many(jobs.all) == source.get_many(jobs.all)
        assert target.get(jobs.leased).status is JobStatus.LEASED  # type: ignore[union-attr]
        assert target.dead_letters() == source.dead_letters()
        assert target.sources.sync_state("src") == source.sources.sync_state("src")
        assert target.definitions() == source.definitions()
        for job_id in jobs.all:
            assert target.history(job_id) == source.history(job_id)
        report = target.projections().verify()
        assert report.clean, report
        assert {view.name for view in report.views} >= {"queue", "audit", "dead_letters"}


NOW_DEPENDENT = {"longest_heartbeat_gap_s"}
"""Diagnostics measured up to the wall clock's now for a live lease: they differ by the
milliseconds between two calls, on any two reads."""


def _cli_json(url: str, *args: str) -> object:
    result = invoke(url, *args, "--json")
    assert result.exit_code == 0, result.stderr
    value = json.loads(result.stdout)
    if isinstance(value, dict):
        for key in ("diagnostics", "findings"):
            if key in value:
                value[key] = [d for d in value[key] if d["name"] not in NOW_DEPENDENT]
    return value


def test_commands_agree_on_source_and_target(
    pg_url: str, sqlite_target: str, clock: FakeClock
) -> None:
    """Cross-backend (PostgreSQL -> SQLite): show, history, diagnose, dlq and sync-state print
    the same on the target as on the source, and projections verify is clean there."""
    jobs = build(pg_url, clock)
    _import(sqlite_target, export_bytes(pg_url))
    for job_id in (jobs.leased, jobs.dead, jobs.requeued, jobs.synced):
        for command in ("show", "history", "diagnose"):
            source = _cli_json(pg_url, command, str(job_id))
            assert _cli_json(sqlite_target, command, str(job_id)) == source, (command, job_id)
    assert _cli_json(sqlite_target, "dlq") == _cli_json(pg_url, "dlq")
    assert _cli_json(sqlite_target, "sync-state", "src") == _cli_json(pg_url, "sync-state", "src")
    verify = invoke(sqlite_target, "projections", "verify")
    assert verify.exit_code == 0, verify.stdout


def test_import_twice_is_a_no_op(db_url: str, sqlite_target: str, clock: FakeClock) -> None:
    """A second import of the same file appends nothing and says so."""
    build(db_url, clock)
    data = export_bytes(db_url)
    _import(sqlite_target, data)
    before = head(sqlite_target)
    result = invoke(sqlite_target, "import", "-", "--json", stdin=data)
    assert result.exit_code == 0, result.stderr
    assert head(sqlite_target) == before
    report = json.loads(result.stdout)
    assert (report["jobs"], report["events"], report["skipped_jobs"]) == (0, 0, 8)
    assert report["skipped_definitions"] == 2
    assert "nothing to import" in result.stderr
    assert export_bytes(sqlite_target) == data


def test_import_into_the_source_itself_skips_everything(db_url: str, clock: FakeClock) -> None:
    """Importing a ledger's own export into it (same stream ids, same events) is a no-op."""
    build(db_url, clock)
    data = export_bytes(db_url)
    before = head(db_url)
    summary = _import(db_url, data)
    assert "nothing to import" in summary
    assert head(db_url) == before


def test_small_pages_and_batches_round_trip(
    db_url: str, sqlite_target: str, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Export pages of 3 jobs over windows of 7 positions, and import batches of 2 streams
    or 4 events, give the same file."""
    build(db_url, clock)
    data = export_bytes(db_url)
    monkeypatch.setattr(exporter, "PAGE", 3)
    monkeypatch.setattr(exporter, "WINDOW", 7)
    monkeypatch.setattr(importer, "BATCH_STREAMS", 2)
    monkeypatch.setattr(importer, "BATCH_EVENTS", 4)
    assert export_bytes(db_url) == data
    _import(sqlite_target, data)
    assert export_bytes(sqlite_target) == data


def test_export_file_matches_stdout_and_is_streamed_in_order(
    db_url: str, clock: FakeClock, tmp_path: Path
) -> None:
    """--output writes the same bytes as stdout; the header comes first, then definitions
    sorted by type, then jobs in enqueue order, each stream contiguous and in version order."""
    jobs = build(db_url, clock)
    data = export_bytes(db_url)
    out = f"{tmp_path}/h.jsonl"
    result = invoke(db_url, "export", "--output", out, "--json")
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["jobs"] == 8
    with open(out, "rb") as handle:
        assert handle.read() == data
    header, events, _ = parts(data)
    lines = [msgspec.json.decode(line) for line in (header, *events)]
    assert lines[0] == {"format": "jobledger-history", "version": 2}
    kinds = [line["kind"] for line in lines[1:]]
    assert kinds == sorted(kinds, key=lambda kind: kind != "job_type")
    types = [
        line["event"]["definition"]["job_type"]
        for line in lines[1:]
        if line["version"] == 1 and line["kind"] == "job_type"
    ]
    assert types == ["ingest", "t"]
    streams = [line["stream"] for line in lines[1:] if line["kind"] == "job"]
    order = list(dict.fromkeys(streams))
    assert order == [str(job_id) for job_id in jobs.all]
    for stream in order:
        versions = [line["version"] for line in lines[1:] if line["stream"] == stream]
        assert versions == list(range(1, len(versions) + 1))
    assert list(lines[1]) == ["stream", "kind", "version", "topic", "event"]


def test_a_job_mid_lease_round_trips_and_its_lease_still_fences(
    db_url: str, sqlite_target: str, clock: FakeClock
) -> None:
    """A leased job (heartbeat, stage, checkpoint) exports, imports and exports again
    byte-identically; in the target it is leased by the same worker until the same time, and
    its lease holder can go on (heartbeat) where the source left off."""
    jobs = build(db_url, clock)
    data = export_bytes(db_url, str(jobs.leased))
    _import(sqlite_target, data)
    assert export_bytes(sqlite_target) == data
    with Ledger.open(db_url) as source, Ledger.open(sqlite_target, clock=clock) as target:
        state = target.get(jobs.leased)
        assert state == source.get(jobs.leased)
        assert state is not None and state.status is JobStatus.LEASED and state.lease is not None
        assert state.checkpoint == {"page": 3} and state.stage == "running"
        renewed = target.heartbeat(state.lease, lease_s=60)
        assert renewed.version == state.version + 1
        assert renewed.lease_expires_at == clock.now() + timedelta(seconds=60)
