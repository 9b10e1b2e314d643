"""``jobledger worker --reaper-interval / --reaper-retry-delay``: the pool's reaper, set from
the command line (issue 12), checked on a real worker process."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from uuid import UUID

import pytest
from click.testing import CliRunner

from jobledger_cli.main import cli
from ledger import FakeClock, Ledger
from ledger.core.events import JobRetryScheduled

ORPHAN_TYPE = "orphan"
"""A type no handler of the app serves: the pool reaps its expired leases, never claims it."""
APP = textwrap.dedent(
    """
    from ledger.runtime.handlers import Registry

    registry = Registry()

    @registry.handler("app.ok")
    async def ok(ctx):
        return None
    """
)
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def app_module(tmp_path: Path) -> str:
    """A handlers module in ``tmp_path`` under a fresh name (the worker's working directory)."""
    name = f"jl_reaper_app_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{name}.py").write_text(APP)
    return name


def _expired_lease(url: str) -> UUID:
    """A job of the orphan type whose lease ended in 2020 (claimed by a vanished worker)."""
    clock = FakeClock(start=datetime(2020, 1, 1, tzinfo=UTC))
    with Ledger.open(url, clock=clock) as ledger:
        ledger.define(ORPHAN_TYPE, max_attempts=5)
        job_id = ledger.enqueue(ORPHAN_TYPE).job_id
        assert job_id is not None
        ledger.claim("gone@elsewhere:1", types=[ORPHAN_TYPE], lease_s=1)
    return job_id


def _reaped_retry(url: str, job_id: UUID) -> JobRetryScheduled | None:
    with Ledger.open(url) as ledger:
        events = [r.event for r in ledger.history(job_id)]
    return next((e for e in events if isinstance(e, JobRetryScheduled)), None)


def _wait_for(found: Callable[[], JobRetryScheduled | None], timeout_s: float) -> JobRetryScheduled:
    """Poll a real process's effect (nothing to wait on across processes) until ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        result = found()
        if result is not None:
            return result
        time.sleep(0.05)
    raise AssertionError(f"not reaped within {timeout_s}s")


@pytest.fixture
def worker(db_url: str, app_module: str, tmp_path: Path) -> Iterator[subprocess.Popen[bytes]]:
    """``jobledger worker`` with a 0.2 s reaper interval and a 7 s retry delay, stopped by
    SIGTERM afterwards."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    argv = [str(Path(sys.executable).parent / "jobledger"), "--db", db_url, "worker"]
    argv += ["--app", f"{app_module}:registry", "--reaper-interval", "0.2"]
    argv += ["--reaper-retry-delay", "7", "--grace", "1"]
    process = subprocess.Popen(argv, cwd=tmp_path, env=env, stderr=subprocess.PIPE)
    yield process
    process.send_signal(signal.SIGTERM)
    _, stderr = process.communicate(timeout=30)
    assert process.returncode == 0, stderr.decode()


def test_the_pools_reaper_runs_on_the_interval_with_the_retry_delay_given(
    db_url: str, worker: subprocess.Popen[bytes]
) -> None:
    """A lease that expires after the pool's first reaper pass is reaped by a later one within
    a few intervals (the 30 s default would not be), and retried after the 7 s given."""
    first = _expired_lease(db_url)
    _wait_for(lambda: _reaped_retry(db_url, first), timeout_s=20)  # the pass at start
    later = _expired_lease(db_url)

    retry = _wait_for(lambda: _reaped_retry(db_url, later), timeout_s=5)

    assert retry.delay_s == 7.0
    assert worker.poll() is None, "still running"


@pytest.mark.parametrize("option", ["--reaper-interval", "--reaper-retry-delay"])
@pytest.mark.parametrize("value", ["0", "-1"])
def test_reaper_options_must_be_positive(option: str, value: str) -> None:
    """0 or a negative value is a usage error (exit 2) naming the option."""
    result = CliRunner().invoke(cli, ["worker", "--app", "x:y", option, value])
    assert result.exit_code == 2
    assert f"Invalid value for '{option}'" in result.stderr


def test_worker_help_shows_the_reaper_defaults() -> None:
    """--help lists both options with their defaults (30 s interval, 60 s retry delay)."""
    text = " ".join(CliRunner().invoke(cli, ["worker", "--help"]).stdout.split())
    bound = "x>0, at most 100 years"
    assert "--reaper-interval SECONDS" in text and f"[default: 30.0; {bound}]" in text
    assert "--reaper-retry-delay SECONDS" in text and f"[default: 60.0; {bound}]" in text
