"""Export filters pick the right jobs, and every picked job's history is whole."""

from __future__ import annotations

from uuid import UUID

import msgspec
from exchange_files import parts
from exchange_helpers import Jobs, build, export_bytes

from ledger import FakeClock, Ledger

ONE_HOUR_IN = "2026-01-01T01:00:00Z"
"""``build`` enqueues the first five jobs before this and the last three after it."""


def _exported(url: str, *args: str) -> tuple[list[UUID], list[str], dict[UUID, int]]:
    """(job streams in file order, job types defined, lines per job)."""
    _, events, _ = parts(export_bytes(url, *args))
    lines = [msgspec.json.decode(line) for line in events]
    jobs: dict[UUID, int] = {}
    types = []
    for line in lines:
        if line["kind"] == "job":
            jobs[UUID(line["stream"])] = jobs.get(UUID(line["stream"]), 0) + 1
        elif line["version"] == 1:
            types.append(line["event"]["definition"]["job_type"])
    return list(jobs), types, jobs


CASES: list[tuple[tuple[str, ...], tuple[str, ...], list[str]]] = [
    ((), Jobs._fields, ["ingest", "t"]),
    (("--type", "ingest"), ("dead", "requeued", "synced"), ["ingest"]),
    (("--org", "acme"), ("succeeded", "dead", "leased", "pending"), ["ingest", "t"]),
    (("--status", "pending"), ("retrying", "requeued", "pending"), ["ingest", "t"]),
    (("--status", "leased", "--org", "acme"), ("leased",), ["t"]),
    (("--since", ONE_HOUR_IN), ("leased", "synced", "pending"), ["ingest", "t"]),
    (
        ("--until", ONE_HOUR_IN),
        ("succeeded", "dead", "retrying", "cancelled", "requeued"),
        ["ingest", "t"],
    ),
    (("--since", ONE_HOUR_IN, "--type", "t"), ("leased", "pending"), ["t"]),
    (("--status", "succeeded", "--type", "nope"), (), []),
]
"""(export arguments, the jobs of ``build`` they pick in order, the definitions exported)."""


def test_filters_pick_jobs_with_whole_histories(db_url: str, clock: FakeClock) -> None:
    """Current type/org/status and enqueue time select jobs; their definitions come along;
    each job's every event is exported, in enqueue order."""
    jobs = build(db_url, clock)
    with Ledger.open(db_url) as ledger:
        lengths = {job_id: len(ledger.history(job_id)) for job_id in jobs.all}
    for args, picked, types in CASES:
        exported, defined, counts = _exported(db_url, *args)
        assert exported == [getattr(jobs, name) for name in picked], args
        assert defined == types, args
        assert counts == {job_id: lengths[job_id] for job_id in exported}, args


def test_named_jobs_are_exported_in_enqueue_order(db_url: str, clock: FakeClock) -> None:
    """JOB arguments export those jobs (in enqueue order, whatever the argument order),
    filters still applying."""
    jobs = build(db_url, clock)
    exported, defined, _ = _exported(db_url, str(jobs.synced), str(jobs.succeeded))
    assert exported == [jobs.succeeded, jobs.synced]
    assert defined == ["ingest", "t"]
    exported, _, _ = _exported(db_url, str(jobs.synced), str(jobs.succeeded), "--type", "t")
    assert exported == [jobs.succeeded]
