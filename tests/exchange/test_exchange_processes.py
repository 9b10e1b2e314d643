"""The issue's backup repros, run as a user runs them: the installed ``jobledger`` script in
real processes, a shell's ``head``, real files."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

JOBLEDGER = Path(sys.executable).parent / "jobledger"


def _run(command: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``command`` in a shell (``jobledger`` on its PATH), $JOBLEDGER_DB removed."""
    env = {key: value for key, value in os.environ.items() if key != "JOBLEDGER_DB"}
    env["PATH"] = f"{JOBLEDGER.parent}{os.pathsep}{env.get('PATH', '')}"
    return subprocess.run(
        command,
        shell=True,
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _ok(command: str, cwd: Path) -> str:
    done = _run(command, cwd)
    assert done.returncode == 0, (command, done.stdout, done.stderr)
    return done.stdout


def test_the_backup_repros_from_the_shell(db_url: str, tmp_path: Path) -> None:
    """On each backend: a run_at in the year 999 exports and imports into a fresh SQLite
    ledger; `head -n 3` of the export is refused (exit 1, one error line, no file made); a
    non-UTF-8 file and an empty file are refused the same way."""
    _ok(f"jobledger --db '{db_url}' define t1", tmp_path)
    job = _ok(f"jobledger --db '{db_url}' enqueue t1 --run-at 0999-06-01T00:00:00Z", tmp_path)
    _ok(f"jobledger --db '{db_url}' export -o f", tmp_path)
    imported = _run("jobledger --db fresh.db import f", tmp_path)
    assert imported.returncode == 0, imported.stderr
    shown = _ok(f"jobledger --db fresh.db show {job.strip()} --json", tmp_path)
    assert '"run_at": "0999-06-01T00:00:00' in shown
    (tmp_path / "bad.jsonl").write_bytes(b'{"format":"jobledger-history","version":2}\n\xff\n')
    (tmp_path / "empty.jsonl").write_bytes(b"")
    refusals = {
        "head -n 3 f > cut.jsonl && jobledger --db cut.db import cut.jsonl": (
            "error: import.truncated: line 4: the file ends after line 3"
        ),
        "jobledger --db cut.db import bad.jsonl --json": "error: import.bad_line: line 2: ",
        "jobledger --db cut.db import empty.jsonl": "error: import.bad_line: line 1: empty file",
    }
    for command, starts in refusals.items():
        done = _run(command, tmp_path)
        assert done.returncode == 1, (command, done.stderr)
        assert done.stdout == ""
        [line] = done.stderr.splitlines()
        assert line.startswith(starts), line
        assert not (tmp_path / "cut.db").exists()
