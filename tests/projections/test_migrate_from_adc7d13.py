"""A ledger made by an earlier release's code is brought forward by ``jobledger migrate``.

Issue 30 changes the hot path's storage; every such change must leave a ledger made before it
usable. The earlier code is the repository's own at ``adc7d13`` (the main that issue 30's
figures start from), run from a ``git archive`` of it in a child interpreter: it initialises a
PostgreSQL ledger and leaves jobs in every state (succeeded, retry pending, dead, cancelled,
leased, pending in another queue, with orgs and idempotency keys). This code then migrates it;
``projections verify`` and ``replay --check --all`` are clean, the old jobs read as they were,
and a worker of this code finishes the work the old one left.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from click.testing import CliRunner

from jobledger_cli.main import cli
from ledger import JobStatus, Ledger

OLD = "adc7d13"
ROOT = Path(__file__).resolve().parents[2]

OLD_SIDE = r"""
import sys
import ledger
from ledger import Ledger
from ledger.core.events import Failure, FailureKind

assert ledger.__file__.startswith(sys.argv[2]), ledger.__file__  # the old code, not ours
with Ledger.open(sys.argv[1], create=True) as ledger:
    ledger.define("mail", max_attempts=3)
    ledger.define("report")
    mail = [
        ledger.enqueue("mail", {"to": f"u{i}"}, org="acme" if i % 2 else None,
                       idempotency_key=f"k{i}")
        for i in range(6)
    ]
    ledger.enqueue("report", {"day": 1}, queue="reports", priority=5)
    claimed = ledger.claim("old-worker", limit=4, types=["mail"])
    ledger.succeed(claimed[0].lease, output={"sent": True})
    ledger.fail(claimed[1].lease, Failure(FailureKind.RETRYABLE, "smtp.down", "smtp is down"))
    ledger.fail(claimed[2].lease, Failure(FailureKind.TERMINAL, "bad.address", "no such user"))
    ledger.cancel(mail[5].job_id)
    print(" ".join(str(state.job_id) for state in claimed))
"""


@pytest.fixture
def old_code(tmp_path: Path) -> Path:
    """The ledger's code at ``OLD``, extracted from the repository's history."""
    known = subprocess.run(
        ["git", "-C", str(ROOT), "cat-file", "-e", f"{OLD}^{{commit}}"],
        capture_output=True,
        check=False,
    )
    if known.returncode != 0:
        pytest.skip(f"needs the repository's history (commit {OLD}); a shallow copy lacks it")
    where = tmp_path / "old"
    where.mkdir()
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", OLD, "ledger", "projections"],
        capture_output=True,
        check=True,
    )
    subprocess.run(["tar", "-x", "-C", str(where)], input=archive.stdout, check=True)
    return where


def _jobledger(url: str, *args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["--db", url, *args])
    return result.exit_code, result.stdout + result.stderr


def test_a_ledger_made_by_adc7d13_migrates_clean_and_keeps_working(
    old_code: Path, empty_pg_url: str
) -> None:
    made = subprocess.run(
        [sys.executable, "-c", OLD_SIDE, empty_pg_url, str(old_code)],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(old_code)},
        cwd=old_code,
    )
    done, retried, dead, leased = (uuid.UUID(i) for i in made.stdout.split())

    code, out = _jobledger(empty_pg_url, "migrate", "--json")
    assert code == 0, out
    code, out = _jobledger(empty_pg_url, "projections", "verify", "--json")
    assert code == 0, out
    assert json.loads(out)["clean"] is True
    code, out = _jobledger(empty_pg_url, "replay", "--check", "--all")
    assert code == 0, out

    with Ledger.open(empty_pg_url) as ledger:
        statuses = {
            job: state.status
            for job in (done, dead, leased, retried)
            if (state := ledger.get(job)) is not None
        }
        assert statuses == {
            done: JobStatus.SUCCEEDED,
            dead: JobStatus.DEAD,
            leased: JobStatus.LEASED,
            retried: JobStatus.PENDING,
        }
        assert ledger.counts() == {
            "succeeded": 1,
            "dead": 1,
            "leased": 1,
            "pending": 3,
            "cancelled": 1,
        }
        # This code's worker takes the work the old one left (the due pending jobs).
        again = ledger.claim("new-worker", limit=10, lease_s=30)
        assert {state.job_type for state in again} == {"mail", "report"}
        for state in again:
            assert state.lease is not None
            ledger.succeed(state.lease)
        assert ledger.counts()["succeeded"] == 1 + len(again)
    code, out = _jobledger(empty_pg_url, "projections", "verify")
    assert code == 0, out
