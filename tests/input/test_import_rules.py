"""``jobledger import`` applies enqueue's and the workers' rules to every line before it
writes, writes the whole file in one transaction, and refuses a target with live work unless
told to; on both backends."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from exchange_files import parts, seal
from input_helpers import TOO_DEEP

from jobledger_cli.main import cli
from ledger import EnqueueRequest, FakeClock, Ledger

JOBS = 700
"""More than one import batch (500 streams), so line 603 lies in the second."""


def invoke(url: str, *args: str) -> Result:
    return CliRunner().invoke(cli, ["--db", url, *args])


def head(url: str) -> int:
    """The target's newest notification id (0: nothing written, or no ledger there yet)."""
    with Ledger.open(url, create=True) as ledger:
        return ledger.store.head_position()


def export_lines(url: str) -> list[dict[str, Any]]:
    """The export of ``url`` as parsed lines (header first, no trailer: :func:`write_file`
    writes one for the lines as edited)."""
    chunks: list[bytes] = []
    with Ledger.open(url) as ledger:
        ledger.export_history(chunks.append)
    header, events, _ = parts(b"".join(chunks))
    return [json.loads(line) for line in (header, *events)]


def write_file(path: Path, lines: list[dict[str, Any]]) -> str:
    """The lines (header first) as a file, sealed with a trailer that states them."""
    encoded = [(json.dumps(line, ensure_ascii=True) + "\n").encode() for line in lines]
    path.write_bytes(seal(encoded[0], encoded[1:]))
    return str(path)


@pytest.fixture(scope="module")
def source_lines(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    """An export of 700 enqueued jobs of type ``t``, the last 100 of them leased."""
    url = f"sqlite:///{tmp_path_factory.mktemp('source') / 'source.db'}"
    clock = FakeClock()
    with Ledger.open(url, create=True, clock=clock) as ledger:
        ledger.define("t")
        ledger.enqueue_many(
            [
                EnqueueRequest(job_type="t", payload={"n": n}, priority=1 if n >= 600 else 0)
                for n in range(JOBS)
            ]
        )
        clock.advance(1)
        ledger.claim("w-1", limit=100, lease_s=60)
    return export_lines(url)


def _line(lines: list[dict[str, Any]], topic: str, after: int) -> int:
    """The index (= line number - 1) of the first ``topic`` line at or after line ``after``."""
    return next(i for i in range(after - 1, len(lines)) if lines[i]["topic"] == topic)


def _request(event: dict[str, Any]) -> dict[str, Any]:
    request: dict[str, Any] = event["request"]
    return request


EDITS: dict[str, tuple[str, Callable[[dict[str, Any]], None]]] = {
    "NUL in org": ("job_enqueued.v2", lambda e: _request(e).update(org="acme\u0000")),
    "empty org": ("job_enqueued.v2", lambda e: _request(e).update(org="")),
    "2 MB payload": ("job_enqueued.v2", lambda e: _request(e).update(payload={"x": "y" * 2**21})),
    "payload too deep": ("job_enqueued.v2", lambda e: _request(e).update(payload=TOO_DEEP)),
    "big integer": ("job_enqueued.v2", lambda e: _request(e).update(payload={"n": 2**64})),
    "lone surrogate": ("job_enqueued.v2", lambda e: _request(e).update(queue="q\udc00")),
    "lease until 9999-12-31": (
        "job_leased.v1",
        lambda e: e.update(lease_expires_at="9999-12-31T00:00:00.000000Z"),
    ),
    "escape in worker id": ("job_leased.v1", lambda e: e.update(worker_id="w\u001b[2J")),
}


@pytest.mark.parametrize("case", sorted(EDITS))
def test_import_refuses_a_line_that_breaks_enqueue_or_worker_rules(
    source_lines: list[dict[str, Any]], target_url: str, tmp_path: Path, case: str
) -> None:
    """A bad line 603 (or later) is named and refused before anything is written."""
    topic, edit = EDITS[case]
    lines = json.loads(json.dumps(source_lines))
    index = _line(lines, topic, 603)
    edit(lines[index]["event"])
    result = invoke(target_url, "import", write_file(tmp_path / "bad.jsonl", lines))
    assert result.exit_code == 1, result.output
    assert result.stderr.startswith(f"error: import.bad_line: line {index + 1}: "), result.stderr
    assert len(result.stderr.splitlines()) == 1 and "Traceback" not in result.stderr
    assert head(target_url) == 0


def test_import_commits_nothing_when_a_late_batch_fails(
    source_lines: list[dict[str, Any]], target_url: str, tmp_path: Path
) -> None:
    """Two jobs 600 lines apart sharing an idempotency key: the clash in the second batch
    leaves the first uncommitted (one transaction for the whole file)."""
    lines = json.loads(json.dumps(source_lines))
    for index in (_line(lines, "job_enqueued.v2", 3), _line(lines, "job_enqueued.v2", 603)):
        _request(lines[index]["event"])["idempotency_key"] = "same-key"
    result = invoke(target_url, "import", write_file(tmp_path / "clash.jsonl", lines))
    assert result.exit_code == 1, result.output
    assert head(target_url) == 0
    assert result.stderr.startswith("error: import.conflict: the streams from line 503 on")


def test_import_refuses_a_target_with_live_work_unless_told(
    source_lines: list[dict[str, Any]], target_url: str, tmp_path: Path
) -> None:
    """A pending job in the target refuses the import (nothing written) until --into-live;
    a repeat of an import already there is not refused, as it writes nothing."""
    with Ledger.open(target_url, create=True) as ledger:
        ledger.define("other")
        ledger.enqueue("other")
        before = ledger.store.head_position()
    path = write_file(tmp_path / "file.jsonl", source_lines)
    refused = invoke(target_url, "import", path)
    assert refused.exit_code == 1, refused.output
    assert refused.stderr.startswith("error: import.target_has_live_work: the target holds 1 ")
    assert "--into-live" in refused.stderr
    assert head(target_url) == before
    imported = invoke(target_url, "import", "--into-live", path)
    assert imported.exit_code == 0, imported.output
    assert head(target_url) == before + len(source_lines) - 1
    again = invoke(target_url, "import", path)
    assert again.exit_code == 0 and "nothing to import" in again.stderr
