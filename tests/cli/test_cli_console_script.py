"""The installed ``jobledger`` console script, run as a real process against real databases."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from uuid import UUID

from ledger import JobStatus, Ledger

JOBLEDGER = Path(sys.executable).parent / "jobledger"


def jobledger(url: str, *args: str) -> subprocess.CompletedProcess[str]:
    """Run the console script with ``--db url``; $JOBLEDGER_DB is removed so it cannot leak in."""
    env = {key: value for key, value in os.environ.items() if key != "JOBLEDGER_DB"}
    return subprocess.run(
        [str(JOBLEDGER), "--db", url, *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )


def ok(url: str, *args: str) -> str:
    """Run and require exit 0 with nothing on stderr; return stdout."""
    done = jobledger(url, *args)
    assert (done.returncode, done.stderr) == (0, ""), done
    return done.stdout


def _walk_through(url: str, where: str) -> None:
    assert ok(url, "init") == f"initialised {where}\n"
    assert ok(url, "init") == f"{where} already initialised\n"
    assert ok(url, "define", "send_email", "--max-attempts", "3").startswith("defined send_email:")
    job_id = UUID(ok(url, "enqueue", "send_email", '{"to": "ada@example.com"}').strip())

    shown = json.loads(ok(url, "show", str(job_id), "--json"))
    assert (shown["job_id"], shown["status"], shown["max_attempts"]) == (str(job_id), "pending", 3)
    assert shown["payload"] == {"to": "ada@example.com"}
    events = json.loads(ok(url, "history", str(job_id), "--json"))
    assert [(e["version"], e["event"]) for e in events] == [(1, "job_enqueued")]

    with Ledger.open(url) as ledger:
        state = ledger.get(job_id)
        assert state is not None and state.status is JobStatus.PENDING
        assert ledger.counts() == {"pending": 1}


def test_console_script_walk_through_on_sqlite(tmp_path: Path) -> None:
    """init twice, define, enqueue, show --json and history --json work as a real process."""
    path = tmp_path / "ledger.db"
    _walk_through(str(path), f"SQLite database {path}")


def test_console_script_walk_through_on_postgres(empty_pg_url: str) -> None:
    """The same walk-through against a PostgreSQL database that starts empty."""
    _walk_through(empty_pg_url, f"PostgreSQL database {empty_pg_url}")


def test_console_script_failure_is_one_stderr_line(tmp_path: Path) -> None:
    """A real process prints one error line and exits 1: no traceback, no log noise."""
    done = jobledger(str(tmp_path / "missing.db"), "show", "0b7c0e8e-2b8f-4a53-9c8e-3f1d2c556a11")
    assert done.returncode == 1
    assert done.stdout == ""
    assert done.stderr.splitlines() == [
        f"error: store.not_initialised: no database file at {tmp_path / 'missing.db'}; "
        "run `jobledger init` first"
    ]


def test_python_dash_m_cli_main_runs_the_cli(tmp_path: Path) -> None:
    """``python -m jobledger_cli.main`` is the console script too (it used to import the module
    and exit 0 having run nothing): it initialises a ledger and reports a usage error, exit 2."""
    db = tmp_path / "m.db"
    done = subprocess.run(
        [sys.executable, "-m", "jobledger_cli.main", "--db", str(db), "init"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "initialised" in done.stdout
    assert db.exists()
    bad = subprocess.run(
        [sys.executable, "-m", "jobledger_cli.main", "no-such-command"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert bad.returncode == 2
