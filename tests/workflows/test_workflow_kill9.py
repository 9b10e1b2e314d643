"""A real ``jobledger worker`` killed (SIGKILL) in the middle of a workflow step: the step's
job is recovered like any job's (its lease expires, a second worker's reaper retries it, that
worker runs it), the run ends succeeded and its history verifies and replays clean."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
from store_helpers import assert_history_holds, job, spec

from ledger import JobStatus, Ledger
from ledger.core.events import JobFailed, JobLeased, JobRetryScheduled
from ledger.core.values import FailureKind
from ledger.core.workflows.ids import step_job_id
from ledger.core.workflows.status import RunStatus

ROOT = Path(__file__).resolve().parents[2]
APP = textwrap.dedent(
    """
    import pathlib
    import time

    from ledger.runtime.handlers import Registry

    registry = Registry()

    @registry.handler("work")
    def work(ctx):
        # The slow step's first run says it started, then blocks until the test's SIGKILL
        # (the file it waits for is never written); any later run returns at once.
        key = ctx.payload["key"]
        if key == "slow":
            gate = pathlib.Path(ctx.payload["dir"])
            first = not (gate / "started-1").exists()
            (gate / f"started-{ctx.attempt}").write_text("")
            while first and not (gate / "never").exists():
                time.sleep(0.05)
        return {"key": key, "attempt": ctx.attempt}
    """
)


@pytest.fixture
def app_module(tmp_path: Path) -> str:
    """The handlers module in ``tmp_path`` (the workers' working directory)."""
    name = f"jl_kill9_app_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{name}.py").write_text(APP)
    return name


def _worker(url: str, app_module: str, cwd: Path, host: str) -> subprocess.Popen[bytes]:
    """``jobledger worker`` with a 1 s lease and a reaper every 0.2 s retrying at 0.1 s, on
    ``host`` (two hosts: a worker releases at boot the claims of its own host's dead
    processes at once, which would skip the lease's expiry this test is about)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    argv = [str(Path(sys.executable).parent / "jobledger"), "--db", url, "worker"]
    argv += ["--host-id", host]
    argv += ["--app", f"{app_module}:registry", "--lease", "1", "--poll", "0.1"]
    argv += ["--reaper-interval", "0.2", "--reaper-retry-delay", "0.1", "--grace", "5"]
    return subprocess.Popen(argv, cwd=cwd, env=env, stderr=subprocess.PIPE)


def _wait_for(done: Callable[[], bool], timeout_s: float, what: str) -> None:
    """Poll a real process's effect (nothing to wait on across processes)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if done():
            return
        time.sleep(0.05)  # polling real processes: real time
    raise AssertionError(f"{what}: not within {timeout_s}s")


def test_a_worker_killed_mid_step_is_recovered_and_the_run_succeeds(
    db_url: str, app_module: str, tmp_path: Path
) -> None:
    """root -> slow -> sink: the first worker is SIGKILLed while ``slow`` runs (its job
    leased, heartbeats stopping with it); the second worker's reaper expires the lease and
    schedules the retry, the second worker runs attempt 2, the sink follows, the run
    succeeds with the sink's output; every view verifies and every job and run replays."""
    with Ledger.open(db_url) as ledger:
        ledger.define("work", max_attempts=3)
        run = ledger.workflows.submit(
            spec(
                job("root"),
                job("slow", "root", payload={"key": "slow", "dir": str(tmp_path)}),
                job("sink", "slow"),
                result_step="sink",
            )
        ).run_id
    slow = step_job_id(run, "slow")
    first = _worker(db_url, app_module, tmp_path, "host-a")
    try:
        _wait_for((tmp_path / "started-1").exists, 60, "the slow step's first attempt")
        first.send_signal(signal.SIGKILL)
        first.wait(timeout=10)
    finally:
        if first.poll() is None:
            first.kill()
    assert first.returncode == -signal.SIGKILL
    with Ledger.open(db_url) as ledger:
        killed = ledger.get(slow)
        assert killed is not None and killed.status is JobStatus.LEASED
        assert ledger.workflows.handle(run).status() is RunStatus.RUNNING

    second = _worker(db_url, app_module, tmp_path, "host-b")
    try:
        with Ledger.open(db_url) as ledger:
            _wait_for(
                lambda: ledger.workflows.handle(run).status() is RunStatus.SUCCEEDED,
                60,
                "the run's end",
            )
    finally:
        second.send_signal(signal.SIGTERM)
        _, stderr = second.communicate(timeout=30)
    assert second.returncode == 0, stderr.decode()

    assert (tmp_path / "started-2").exists()
    with Ledger.open(db_url) as ledger:
        assert ledger.workflows.handle(run).result() == {"key": "sink", "attempt": 1}
        events = [r.event for r in ledger.history(slow)]
        [expired] = [e for e in events if isinstance(e, JobFailed)]
        assert expired.failure.kind is FailureKind.LEASE_EXPIRED
        assert any(isinstance(e, JobRetryScheduled) for e in events)
        workers = [e.worker_id for e in events if isinstance(e, JobLeased)]
        assert [w.split("@")[1].split(":")[0] for w in workers] == ["host-a", "host-b"]
        steps = {step.key: step for step in ledger.workflows.handle(run).steps()}
        assert steps["slow"].output == {"key": "slow", "attempt": 2}
        assert_history_holds(ledger)
