"""The recipes of examples/ run as a user runs them: a subprocess of this interpreter, against
a real ledger, printing what docs/testing.md says they print."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

PLAIN_SCRIPT_PRINTS = """\
worked 1 job(s), 1 succeeded
1  job_enqueued
2  job_leased
3  job_stage_changed
4  job_succeeded
status succeeded, output {'greeting': 'hello, Ada'}
"""


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(EXAMPLES / "plain_script.py"), *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.mark.parametrize(
    "url_fixture", ["sqlite_url", pytest.param("pg_url", marks=pytest.mark.postgres)]
)
def test_the_plain_script_works_its_job_and_prints_the_history(
    url_fixture: str, request: pytest.FixtureRequest
) -> None:
    """On each backend the script enqueues, works and prints the four events (the pool's
    start record among them) and the output,
    and the ledger it leaves verifies and replays clean."""
    from ledger import Ledger

    url = str(request.getfixturevalue(url_fixture))
    done = _run(url)
    assert (done.returncode, done.stdout) == (0, PLAIN_SCRIPT_PRINTS), done.stderr
    with Ledger.open(url) as ledger:
        assert ledger.counts().get("succeeded") == 1
        assert ledger.projections().verify().clean
        assert [f for replay in ledger.replay_check_all() for f in replay.findings] == []


def test_the_plain_script_needs_no_argument() -> None:
    """Without a URL it makes its own SQLite ledger in a temporary directory."""
    done = _run()
    assert (done.returncode, done.stdout) == (0, PLAIN_SCRIPT_PRINTS), done.stderr
