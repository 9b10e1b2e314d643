"""Imports that must be refused, with nothing written: bad lines, wrong versions, conflicts."""

from __future__ import annotations

from pathlib import Path

import msgspec
from click.testing import Result
from exchange_helpers import build, export_bytes, head, invoke

from ledger import FakeClock, JobStatus, Ledger


def _refused(result: Result, starts: str, exit_code: int = 1) -> str:
    """One ``error:`` line on stderr, nothing on stdout, the exit code; the line."""
    assert result.exit_code == exit_code, (result.stdout, result.stderr)
    assert result.stdout == ""
    [line] = result.stderr.splitlines()
    assert line.startswith(starts), line
    return line


def _lines(data: bytes) -> list[bytes]:
    return data.splitlines(keepends=True)


def test_malformed_line_is_refused_with_its_number_and_nothing_created(
    sqlite_url: str, sqlite_target: str, clock: FakeClock
) -> None:
    """A broken line N: `error: import.bad_line: line N: …`, exit 1, no target file made."""
    build(sqlite_url, clock)
    lines = _lines(export_bytes(sqlite_url))
    lines[6] = lines[6][:40] + b"\n"
    result = invoke(sqlite_target, "import", "-", stdin=b"".join(lines))
    _refused(result, "error: import.bad_line: line 7: ")
    assert not Path(sqlite_target.removeprefix("sqlite:///")).exists()


def test_wrong_format_version_is_refused_at_line_1(db_url: str, clock: FakeClock) -> None:
    """A header of another format version is refused before anything else is read."""
    build(db_url, clock)
    data = export_bytes(db_url)
    before = head(db_url)
    bumped = data.replace(b'"version":2}', b'"version":4}', 1)
    line = _refused(invoke(db_url, "import", "-", stdin=bumped), "error: import.bad_line: line 1:")
    assert "format version 4" in line
    assert head(db_url) == before
    # Version 3 (a sealed file) this code reads, but its trailer must carry the seal.
    unsealed = data.replace(b'"version":2}', b'"version":3}', 1)
    last = len(unsealed.splitlines())
    line = _refused(
        invoke(db_url, "import", "-", stdin=unsealed), f"error: import.bad_line: line {last}:"
    )
    assert "without the seal" in line
    assert head(db_url) == before


def test_bad_event_fields_and_order_are_refused(
    sqlite_url: str, sqlite_target: str, clock: FakeClock
) -> None:
    """Each kind of bad content names its line: a field of the wrong type, a version gap, a
    job before its type's definition, a naive time, an illegal transition."""
    build(sqlite_url, clock)
    lines = _lines(export_bytes(sqlite_url))
    first_job = next(i for i, line in enumerate(lines) if b'"kind":"job"' in line)
    second_job_line = lines[first_job + 1]

    def refused_at(edited: list[bytes], number: int, words: str) -> None:
        result = invoke(sqlite_target, "import", "-", stdin=b"".join(edited))
        line = _refused(result, f"error: import.bad_line: line {number}: ")
        assert words in line, line

    wrong_type = second_job_line.replace(b'"run_number":1', b'"run_number":"one"')
    refused_at(
        [*lines[: first_job + 1], wrong_type, *lines[first_job + 2 :]], first_job + 2, "run_number"
    )
    refused_at([*lines[: first_job + 1], *lines[first_job + 2 :]], first_job + 2, "was due")
    refused_at([lines[0], *lines[first_job:]], 2, "no definition earlier")
    naive = lines[first_job].replace(b'Z"', b'"')
    refused_at([*lines[:first_job], naive, *lines[first_job + 1 :]], first_job + 1, "time zone")
    twice = [*lines[: first_job + 1], lines[first_job].replace(b'"version":1', b'"version":2')]
    refused_at(twice, first_job + 2, "enqueued twice")
    assert not Path(sqlite_target.removeprefix("sqlite:///")).exists()


def test_conflicting_job_is_refused_and_nothing_is_written(
    db_url: str, sqlite_target: str, clock: FakeClock
) -> None:
    """A job the target holds with another history refuses the whole file: the file's other,
    new jobs are not written either (all or nothing per file)."""
    jobs = build(db_url, clock)
    data = export_bytes(db_url)
    assert (
        invoke(
            sqlite_target, "import", "-", stdin=export_bytes(db_url, str(jobs.pending))
        ).exit_code
        == 0
    )
    with Ledger.open(sqlite_target) as target:
        target.cancel(jobs.pending)
    before = head(sqlite_target)
    result = invoke(sqlite_target, "import", "-", stdin=data)
    line = _refused(result, "error: import.conflict: ")
    assert str(jobs.pending) in line and "different history" in line
    assert head(sqlite_target) == before
    with Ledger.open(sqlite_target) as target:
        assert target.get(jobs.succeeded) is None
        assert target.get(jobs.pending).status is JobStatus.CANCELLED  # type: ignore[union-attr]


def test_conflicting_definition_is_refused(
    db_url: str, sqlite_target: str, clock: FakeClock
) -> None:
    """A job type defined in the target with another history refuses the import."""
    build(db_url, clock)
    with Ledger.open(sqlite_target, create=True) as target:
        target.define("ingest", max_attempts=9)
    before = head(sqlite_target)
    result = invoke(sqlite_target, "import", "-", stdin=export_bytes(db_url))
    _refused(result, "error: import.conflict: job type 'ingest' (line 2)")
    assert head(sqlite_target) == before


def test_export_refusals(db_url: str, clock: FakeClock) -> None:
    """An unknown JOB is job.not_found (exit 1); --json without --output is a usage error."""
    build(db_url, clock)
    missing = "0b7c0e8e-2b8f-4a53-9c8e-3f1d2c556a11"
    _refused(invoke(db_url, "export", missing), f"error: job.not_found: no job {missing}")
    _refused(invoke(db_url, "export", "--json"), "error: --json needs --output", exit_code=2)
    _refused(invoke(db_url, "export", "nope"), "error: Invalid value for '[JOB]...'", exit_code=2)


def test_import_accepts_a_command_level_db(db_url: str, tmp_path: Path, clock: FakeClock) -> None:
    """`jobledger import FILE --db URL` targets URL, as the issue's example writes it."""
    build(db_url, clock)
    data = export_bytes(db_url)
    path = tmp_path / "history.jsonl"
    path.write_bytes(data)
    target = str(tmp_path / "other.db")
    result = invoke(None, "import", str(path), "--db", target)
    assert result.exit_code == 0, result.stderr
    assert export_bytes(target) == data
    assert msgspec.json.decode(data.splitlines()[0]) == {
        "format": "jobledger-history",
        "version": 2,
    }


def test_idempotency_key_held_by_another_target_job_is_a_conflict(
    db_url: str, sqlite_target: str, clock: FakeClock
) -> None:
    """A new job whose idempotency key another target job holds refuses the whole file
    before anything is written (the queue view's unique index would refuse it later)."""
    jobs = build(db_url, clock)
    first = invoke(sqlite_target, "import", "-", stdin=export_bytes(db_url, str(jobs.succeeded)))
    assert first.exit_code == 0, first.stderr
    with Ledger.open(sqlite_target) as target:
        other = target.enqueue("t", org="globex", idempotency_key="k-1").job_id
    before = head(sqlite_target)
    line = _refused(
        invoke(sqlite_target, "import", "-", stdin=export_bytes(db_url)), "error: import.conflict: "
    )
    assert f"job {jobs.cancelled}" in line and f"which job {other} holds" in line
    assert head(sqlite_target) == before
    with Ledger.open(sqlite_target) as target:
        assert target.definition("ingest") is None
