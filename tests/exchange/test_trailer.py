"""An export ends with a trailer (counts and a digest); a file without it, or with one that
does not state its lines, is refused and nothing of it is written."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import Result
from exchange_files import parts, resealed, seal
from exchange_helpers import build, export_bytes, head, invoke

from ledger import FakeClock, JobStatus, Ledger
from ledger.core.codec import DEFAULT_CODEC
from ledger.core.exchange import (
    FileEnd,
    ImportBadLineError,
    ImportTrailerMismatchError,
    ImportTruncatedError,
)
from ledger.core.exchange_reader import read_streams
from ledger.store.streams import job_type_stream_id


def _read(lines: list[bytes], *, allow_untrailed: bool = False) -> FileEnd:
    end = FileEnd()
    for _ in read_streams(
        lines, DEFAULT_CODEC, job_type_stream_id, allow_untrailed=allow_untrailed, end=end
    ):
        pass
    return end


def _nothing_written(url: str) -> None:
    """No SQLite file was made; an empty PostgreSQL database holds no event."""
    if url.startswith("sqlite:///"):
        assert not Path(url.removeprefix("sqlite:///")).exists()
    else:
        with Ledger.open(url, create=True) as ledger:
            assert ledger.store.head_position() == 0


def _one_error_line(result: Result, starts: str) -> str:
    assert result.exit_code == 1, (result.stdout, result.stderr)
    assert result.stdout == ""
    [line] = result.stderr.splitlines()
    assert line.startswith(starts), line
    return line


def test_the_trailer_states_the_file(sqlite_url: str, clock: FakeClock) -> None:
    """The last line counts the event lines and the streams by kind, and carries the sha256
    of every byte before it; the reader checks it and reports it."""
    build(sqlite_url, clock)
    data = export_bytes(sqlite_url)
    header, events, trailer = parts(data)
    stated = json.loads(trailer)["trailer"]
    assert list(stated) == ["events", "streams", "digest"]
    assert stated["events"] == len(events)
    assert stated["streams"] == {"job_type": 2, "job": 8, "workflow": 0}
    assert seal(header, events) == data
    end = _read(data.splitlines(keepends=True))
    assert (end.version, end.lines, end.events) == (2, len(events) + 2, len(events))
    assert end.digest == stated["digest"] and end.digest.startswith("sha256:")


def test_every_file_cut_short_at_a_line_is_refused(sqlite_url: str, clock: FakeClock) -> None:
    """Whatever line an export is cut after (`head -n N`), reading it fails: a missing
    trailer (import.truncated) or a bad line; a cut inside the trailer too."""
    build(sqlite_url, clock)
    lines = export_bytes(sqlite_url).splitlines(keepends=True)
    for keep in range(1, len(lines)):
        with pytest.raises(ImportTruncatedError, match=f"line {keep + 1}: the file ends after"):
            _read(lines[:keep])
    with pytest.raises(ImportBadLineError, match="not a trailer"):
        _read([*lines[:-1], lines[-1][:40]])
    with pytest.raises(ImportTruncatedError, match="trailer has no newline"):
        _read([*lines[:-1], lines[-1].rstrip(b"\n")])


def test_a_changed_or_extended_file_is_refused_at_its_trailer(
    sqlite_url: str, clock: FakeClock
) -> None:
    """A line changed (still a legal history), a line left out, a trailer of other counts or
    a line after the trailer: each is refused, naming the line."""
    build(sqlite_url, clock)
    lines = export_bytes(sqlite_url).splitlines(keepends=True)
    last = len(lines)
    changed = [line.replace(b'"s":"\\u00e9"', b'"s":"e"') for line in lines]
    changed = [line.replace('"s":"é"'.encode(), b'"s":"e"') for line in changed]
    assert changed != lines
    with pytest.raises(ImportTrailerMismatchError, match=f"line {last}: the trailer's digest"):
        _read(changed)
    trailer = json.loads(lines[-1])
    trailer["trailer"]["streams"]["job"] = 7
    miscounted = [*lines[:-1], json.dumps(trailer, separators=(",", ":")).encode() + b"\n"]
    with pytest.raises(ImportTrailerMismatchError, match="counts streams job_type 2, job 7"):
        _read(miscounted)
    with pytest.raises(ImportBadLineError, match=f"line {last + 1}: a line after the trailer"):
        _read([*lines, lines[-2]])
    dropped = [*lines[:-3], lines[-2], lines[-1]]  # a job's last event left out
    with pytest.raises(ImportBadLineError) as caught:
        _read(dropped)
    assert caught.value.code in {"import.trailer_mismatch", "import.bad_line"}


def test_the_issue_repro_a_truncated_export_is_refused(
    db_url: str, target_url: str, tmp_path: Path, clock: FakeClock
) -> None:
    """`head -n 20 pop.jsonl > cut.jsonl; jobledger import cut.jsonl`: refused with
    import.truncated, exit 1, nothing written (a dead job cannot arrive as leased)."""
    jobs = build(db_url, clock)
    pop = export_bytes(db_url)
    cut = tmp_path / "cut.jsonl"
    cut.write_bytes(b"".join(pop.splitlines(keepends=True)[:20]))
    line = _one_error_line(invoke(target_url, "import", str(cut)), "error: import.truncated: ")
    assert "line 21: the file ends after line 20 without the trailer" in line
    _nothing_written(target_url)
    whole = tmp_path / "pop.jsonl"
    whole.write_bytes(pop)
    assert invoke(target_url, "import", str(whole)).exit_code == 0
    with Ledger.open(target_url) as target:
        assert target.get(jobs.dead).status is JobStatus.DEAD  # type: ignore[union-attr]


def _version_1(data: bytes) -> bytes:
    """``data`` as the previous jobledger wrote it: header version 1, no trailer."""
    header, events, _ = parts(data)
    return header.replace(b'"version":2', b'"version":1') + b"".join(events)


def test_a_format_1_file_imports_only_when_allowed_with_a_warning(
    db_url: str, target_url: str, clock: FakeClock
) -> None:
    """A file without a trailer from before format 2 is refused (import.untrailed, line 1)
    unless --allow-untrailed; with it, a warning on stderr and the import; --json stdout
    stays one JSON document, saying format 1 and no digest."""
    build(db_url, clock)
    old = _version_1(export_bytes(db_url))
    line = _one_error_line(
        invoke(target_url, "import", "-", "--json", stdin=old), "error: import.untrailed: line 1:"
    )
    assert "--allow-untrailed" in line
    _nothing_written(target_url)
    allowed = invoke(target_url, "import", "-", "--allow-untrailed", "--json", stdin=old)
    assert allowed.exit_code == 0, allowed.stderr
    report = json.loads(allowed.stdout)
    assert (report["format_version"], report["digest"], report["jobs"]) == (1, None, 8)
    warning, summary = allowed.stderr.splitlines()
    assert warning.startswith("warning: stdin is a format-1 export, which has no trailer")
    assert summary.startswith("imported 8 jobs")
    # A version-2 file cut short stays refused with the flag: its header promises a trailer.
    cut = b"".join(export_bytes(db_url).splitlines(keepends=True)[:-1])
    _one_error_line(
        invoke(target_url, "import", "-", "--allow-untrailed", stdin=cut), "error: import.truncated"
    )


def test_json_import_reports_the_digest_it_checked(
    db_url: str, target_url: str, clock: FakeClock
) -> None:
    """`import --json` says which format version and trailer digest it verified."""
    build(db_url, clock)
    data = export_bytes(db_url)
    result = invoke(target_url, "import", "-", "--json", stdin=data)
    assert result.exit_code == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["format_version"] == 2
    assert report["digest"] == json.loads(parts(data)[2])["trailer"]["digest"]


def test_a_file_changed_between_the_import_passes_is_rolled_back(
    db_url: str, target_url: str, clock: FakeClock
) -> None:
    """The file is read again for the append and its trailer checked again before the
    transaction commits: a file swapped after validation (still a legal history, another
    digest) is refused and the definitions already appended are rolled back."""
    build(db_url, clock)
    data = export_bytes(db_url)
    header, events, _ = parts(data)
    swapped = [line.replace('"s":"é"'.encode(), b'"s":"e"') for line in events]
    assert swapped != events
    opened: list[int] = []

    def open_lines() -> Iterator[bytes]:
        opened.append(1)
        body = data if len(opened) == 1 else header + b"".join(swapped) + parts(data)[2]
        return iter(body.splitlines(keepends=True))

    with Ledger.open(target_url, create=True) as target:
        with pytest.raises(ImportTrailerMismatchError, match="the file was changed"):
            target.import_history(open_lines)
        assert len(opened) == 2  # validated whole, then read again for the append
        assert target.store.head_position() == 0
        assert target.definitions() == []
    assert head(target_url) == 0
    resealed_file = resealed(header + b"".join(swapped))
    assert invoke(target_url, "import", "-", stdin=resealed_file).exit_code == 0


def test_the_sample_of_the_format_page_is_a_whole_checked_file() -> None:
    """docs/export-format.md's sample reads as a version-2 file whose trailer holds."""
    page = (Path(__file__).parents[2] / "docs" / "export-format.md").read_text()
    sample = page[page.index("## Sample") :]
    start = sample.index("```\n") + 4
    lines = [
        line.encode() for line in sample[start : sample.index("```\n", start)].splitlines(True)
    ]
    end = _read(lines)
    assert (end.version, end.events) == (2, 6) and end.digest is not None
