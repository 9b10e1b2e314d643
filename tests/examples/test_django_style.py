"""examples/django_style runs as a Django project's pieces would: settings read from the
environment, ``get_ledger()`` in a view's process, ``jobledger worker`` in another."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from uuid import UUID

import pytest

from ledger import Ledger

PROJECT = Path(__file__).resolve().parents[2] / "examples" / "django_style"
JOBLEDGER = str(Path(sys.executable).parent / "jobledger")


def _run(argv: list[str], url: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        argv,
        cwd=PROJECT,
        env={**os.environ, "JOBLEDGER_DB": url},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.mark.parametrize(
    "url_fixture", ["sqlite_url", pytest.param("pg_url", marks=pytest.mark.postgres)]
)
def test_a_view_enqueues_through_get_ledger_and_a_worker_runs_the_job(
    url_fixture: str, request: pytest.FixtureRequest
) -> None:
    """The ledger named by settings.JOBLEDGER_DB takes the view's job, one ledger per process,
    and `jobledger worker --app jobs:registry --burst` works it; the ledger verifies clean."""
    url = str(request.getfixturevalue(url_fixture))
    signed_up = _run([sys.executable, "signup.py", "7"], url)
    assert signed_up.returncode == 0, signed_up.stderr
    job_id = UUID(signed_up.stdout.strip())

    worked = _run([JOBLEDGER, "worker", "--app", "jobs:registry", "--burst"], url)
    assert worked.returncode == 0, worked.stderr
    with Ledger.open(url) as ledger:
        job = ledger.get(job_id)
        assert job is not None
        assert (job.status.value, job.output) == ("succeeded", {"welcomed": 7})
        assert ledger.projections().verify().clean
        assert [f for replay in ledger.replay_check_all() for f in replay.findings] == []
