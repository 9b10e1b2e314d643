"""A refused import leaves nothing behind: no SQLite file it created, no field of the file
dropped without a word."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from uuid import uuid4

import pytest
from click.testing import Result
from exchange_files import parts, seal
from exchange_helpers import build, export_bytes, invoke

from ledger import FakeClock, Ledger
from ledger.core.codec import DEFAULT_CODEC
from ledger.core.exchange import ImportBadLineError
from ledger.core.exchange_reader import parse_line
from ledger.core.unknown_fields import unknown_field
from ledger.core.workflows.events import WorkflowSubmitted
from ledger.store.new_file import SIDE_FILES


def _refused(result: Result, starts: str) -> str:
    assert result.exit_code == 1, (result.stdout, result.stderr)
    assert result.stdout == ""
    [line] = result.stderr.splitlines()
    assert line.startswith(starts), line
    return line


def _clashing(data: bytes) -> bytes:
    """``data`` with every job's idempotency key the same: a legal file line by line that
    the target's unique index refuses only while the import writes (after the ledger is
    made)."""
    header, events, _ = parts(data)
    edited = []
    for line in events:
        decoded = json.loads(line)
        if decoded["topic"] != "job_enqueued.v2":
            edited.append(line)
            continue
        decoded["event"]["request"].update(idempotency_key="same", org="acme")
        edited.append(json.dumps(decoded, ensure_ascii=False).encode() + b"\n")
    return seal(header, edited)


def test_a_failed_import_removes_the_sqlite_file_it_created(
    db_url: str, tmp_path: Path, clock: FakeClock
) -> None:
    """An import into a new SQLite file that fails once writing (an idempotency clash in
    the file) exits 1 with one error line and leaves no file (nor -wal/-shm) behind."""
    build(db_url, clock)
    (tmp_path / "targets").mkdir()
    target = tmp_path / "targets" / "new.db"
    result = invoke(str(target), "import", "-", stdin=_clashing(export_bytes(db_url)))
    _refused(result, "error: import.conflict: ")
    assert list(target.parent.iterdir()) == []
    assert not any(Path(f"{target}{suffix}").exists() for suffix in SIDE_FILES)


@pytest.mark.parametrize("existing", ["empty file", "ledger"])
def test_a_failed_import_never_removes_a_file_that_was_there(
    db_url: str, tmp_path: Path, clock: FakeClock, existing: str
) -> None:
    """A file that existed before the import (even an empty one) stays after it fails, its
    ledger (if any) unchanged."""
    build(db_url, clock)
    target = tmp_path / "there.db"
    if existing == "empty file":
        target.touch()
        before = 0
    else:
        with Ledger.open(str(target), create=True) as ledger:
            ledger.define("other")
            before = ledger.store.head_position()
    result = invoke(str(target), "import", "-", stdin=_clashing(export_bytes(db_url)))
    _refused(result, "error: import.conflict: ")
    assert target.exists()
    with Ledger.open(str(target), create=True) as ledger:
        assert ledger.store.head_position() == before


ENQUEUED = "job_enqueued.v2"


def _with(fields: dict[str, object], path: str, value: object) -> dict[str, object]:
    """``fields`` with ``value`` added at the dotted ``path``."""
    *outer, last = path.split(".")
    node: dict[str, object] = fields
    for key in outer:
        inner = node[key]
        assert isinstance(inner, dict)
        node = inner
    node[last] = value
    return fields


@pytest.mark.parametrize(
    ("topic", "path"),
    [
        (ENQUEUED, "colour"),
        (ENQUEUED, "request.priorty"),
        (ENQUEUED, "backoff.factor"),
        ("job_type_defined.v1", "definition.backoff.factor"),
        ("job_failed.v1", "failure.detail"),
        ("job_leased.v1", "lease_s"),
    ],
)
def test_an_unknown_field_anywhere_in_an_event_is_refused_by_name_and_line(
    sqlite_url: str, sqlite_target: str, clock: FakeClock, topic: str, path: str
) -> None:
    """A key the event's schema (or a struct inside it) does not declare is refused as
    `import.bad_line: line N: topic: unknown field `path``, nothing created; a key inside
    the payload (the caller's JSON) is not a field and is kept."""
    build(sqlite_url, clock)
    header, events, _ = parts(export_bytes(sqlite_url))
    index = next(i for i, line in enumerate(events) if f'"topic":"{topic}"'.encode() in line)
    decoded = json.loads(events[index])
    _with(decoded["event"], path, 1)
    events[index] = json.dumps(decoded, ensure_ascii=False).encode() + b"\n"
    result = invoke(sqlite_target, "import", "-", stdin=seal(header, events))
    line = _refused(result, f"error: import.bad_line: line {index + 2}: ")
    assert line.endswith(f"{topic}: unknown field `{path}`"), line
    assert not Path(sqlite_target.removeprefix("sqlite:///")).exists()


def test_payload_keys_and_upcast_topics_are_checked_as_data_and_as_the_current_schema() -> None:
    """Keys inside a payload are the caller's data, never unknown fields; an event stored
    under an older topic is checked after its upcast (job_enqueued.v1 had no `workflow`,
    which its upcaster adds), and a key neither version has is refused there too."""
    job_id = uuid4()
    v1 = {
        "job_id": str(job_id),
        "request": {"job_type": "t", "payload": {"any": {"nested": ["keys"]}}},
        "definition_version": 1,
        "priority": 100,
        "run_at": "2026-01-01T00:00:00.000000Z",
        "max_attempts": 3,
        "timeout_s": 60.0,
        "backoff": {"base_s": 2.0, "max_s": 60.0, "jitter": 0.0},
        "at": "2026-01-01T00:00:00.000000Z",
    }

    def line(event: dict[str, object]) -> bytes:
        envelope = {"stream": str(job_id), "kind": "job", "version": 1}
        return json.dumps({**envelope, "topic": "job_enqueued.v1", "event": event}).encode()

    _, record = parse_line(DEFAULT_CODEC, 5, line(v1))
    assert record.event.at == datetime(2026, 1, 1, tzinfo=UTC)
    with pytest.raises(ImportBadLineError, match=r"line 5: job_enqueued\.v1: unknown field `x`"):
        parse_line(DEFAULT_CODEC, 5, line({**v1, "x": 1}))


def test_unknown_fields_of_workflow_steps_are_found_through_their_tags() -> None:
    """A workflow request's steps are a tagged union: each step is checked against the
    struct its `kind` names (a job step's `job_type` is unknown on an external step), down
    to its dependencies."""
    run_id = str(uuid4())

    def submitted(*steps: dict[str, object]) -> dict[str, object]:
        request = {"workflow_type": "etl", "steps": list(steps)}
        return {"run_id": run_id, "request": request, "resolutions": [], "at": "x"}

    job = {"kind": "job", "key": "a", "job_type": "t", "depends_on": []}
    external = {"kind": "external", "key": "b", "depends_on": [{"step": "a"}]}
    assert unknown_field(submitted(job, external), WorkflowSubmitted) is None
    assert unknown_field(submitted({**job, "retries": 2}), WorkflowSubmitted) == (
        "request.steps[0].retries"
    )
    assert unknown_field(submitted(job, {**external, "job_type": "t"}), WorkflowSubmitted) == (
        "request.steps[1].job_type"
    )
    deep = {**external, "depends_on": [{"step": "a", "why": "x"}]}
    assert unknown_field(submitted(job, deep), WorkflowSubmitted) == (
        "request.steps[1].depends_on[0].why"
    )
