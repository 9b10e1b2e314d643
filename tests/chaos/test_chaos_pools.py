"""Several pools on one ledger with exactly-once outcomes, and a worker process's shutdown:
SIGTERM whose grace runs out, and the second signal that stops at once."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from uuid import UUID

import pytest
from chaos_app import LOG_ENV, registry
from chaos_faults import JOBLEDGER, REPO_ROOT, worker_env
from chaos_history import read_side_log
from chaos_run import Load, run_chaos

from ledger import JobStatus, Ledger
from ledger.core.events import JobReleased, JobSucceeded
from ledger.runtime.definitions import sync_definitions
from ledger.runtime.pool import WorkerPool

pytestmark = [pytest.mark.chaos, pytest.mark.timeout(180)]


def _successes(ledger: Ledger, job_id: UUID) -> int:
    return sum(isinstance(r.event, JobSucceeded) for r in ledger.history(job_id))


async def test_two_pools_in_one_process_succeed_every_job_exactly_once(
    db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two pools (own names, own connection pools) in one process over one ledger: every job
    succeeds exactly once and each handler runs exactly once."""
    monkeypatch.setenv(LOG_ENV, str(tmp_path))
    requests = Load(400, seed=7, flaky_share=0.0).requests()
    with Ledger.open(db_url) as first, Ledger.open(db_url) as second:
        sync_definitions(first, registry)
        job_ids = [e.job_id for e in first.enqueue_many(requests) if e.created]
        pools = [
            WorkerPool(first, registry, name="one", concurrency=4, poll_interval_s=0.05),
            WorkerPool(second, registry, name="two", concurrency=4, poll_interval_s=0.05),
        ]
        for pool in pools:
            await pool.start()
        try:
            for _ in range(1200):
                states = await asyncio.to_thread(first.get_many, job_ids)
                if all(not s.status.is_live for s in states.values()):
                    break
                await asyncio.sleep(0.05)
        finally:
            for pool in pools:
                await pool.stop(grace_s=10)
        assert all(s.status == JobStatus.SUCCEEDED for s in first.get_many(job_ids).values())
        assert all(_successes(first, job_id) == 1 for job_id in job_ids)
        assert sum(p.stats.succeeded for p in pools) == len(job_ids)
    starts = Counter(s.job_id for s in read_side_log(tmp_path) if not s.finished)
    assert set(starts) == set(job_ids) and set(starts.values()) == {1}


def test_two_worker_processes_succeed_every_job_exactly_once(db_url: str, tmp_path: Path) -> None:
    """Two worker processes, no faults: every job succeeds exactly once, every handler runs
    exactly once, and every chaos invariant holds."""
    report = run_chaos(
        db_url,
        tmp_path,
        backend="postgres" if db_url.startswith("postgresql") else "sqlite",
        load=Load(800, seed=8, flaky_share=0.0),
        plan=lambda chaos: None,
        workers=2,
    )
    print(f"\nCHAOS {report.figures()}")
    assert not report.violations, report.failure_message()
    assert report.lost == 0 and report.double_successes == 0
    assert report.handler_runs == report.jobs and report.runs_beyond_one == {}


class _Worker:
    """``jobledger worker`` over the chaos app, as a real process."""

    def __init__(self, url: str, log_dir: Path, grace_s: float) -> None:
        self.log_dir = log_dir
        self.stderr_path = log_dir / "worker.err"
        self._stderr = open(self.stderr_path, "wb")  # noqa: SIM115 - closed in wait
        command = [
            JOBLEDGER, "--db", url, "worker", "--app",
            "chaos_app:registry", "--concurrency", "4", f"--grace={grace_s}", "--poll", "0.1",
        ]  # fmt: skip
        self.process = subprocess.Popen(
            command, cwd=REPO_ROOT, env=worker_env(log_dir), stderr=self._stderr
        )

    def wait_for(self, what: str, predicate: Callable[[], bool], timeout_s: float = 30.0) -> None:
        deadline = time.monotonic() + timeout_s
        while not predicate():
            assert self.process.poll() is None, self.stderr_path.read_text()
            assert time.monotonic() < deadline, f"no {what} after {timeout_s}s"
            time.sleep(0.05)

    def started(self, count: int) -> bool:
        return len([s for s in read_side_log(self.log_dir) if not s.finished]) >= count

    def stopping(self) -> bool:
        return "stopping" in self.stderr_path.read_text(errors="replace")

    def wait(self, timeout_s: float) -> int:
        try:
            return self.process.wait(timeout_s)
        finally:
            self._stderr.close()
            if self.process.poll() is None:
                self.process.kill()


def _hang_jobs(url: str, count: int) -> list[UUID]:
    with Ledger.open(url) as ledger:
        sync_definitions(ledger, registry)
        return [ledger.enqueue("chaos.hang", {"n": n}).job_id for n in range(count)]  # type: ignore[misc]


def _assert_released_unconsumed(url: str, job_ids: list[UUID]) -> None:
    with Ledger.open(url) as ledger:
        for job_id in job_ids:
            state = ledger.get(job_id)
            assert state is not None and state.status == JobStatus.PENDING, state
            assert state.attempt == 0, "a released attempt is not consumed"
            assert isinstance(ledger.history(job_id)[-1].event, JobReleased)


def test_sigterm_whose_grace_runs_out_releases_in_flight_jobs(db_url: str, tmp_path: Path) -> None:
    """SIGTERM to a worker whose handlers outlast ``--grace``: it exits 0 soon after the
    grace, and each in-flight job is released with its attempt not consumed."""
    job_ids = _hang_jobs(db_url, 3)
    worker = _Worker(db_url, tmp_path, grace_s=0.5)
    worker.wait_for("three handler starts", lambda: worker.started(3))
    signalled = time.monotonic()
    worker.process.send_signal(signal.SIGTERM)
    assert worker.wait(30) == 0, worker.stderr_path.read_text()
    took = time.monotonic() - signalled
    print(f"\nSIGTERM with grace 0.5s: exited after {took:.2f}s")
    assert took < 10
    _assert_released_unconsumed(db_url, job_ids)


def test_second_sigint_stops_a_worker_at_once(db_url: str, tmp_path: Path) -> None:
    """A second SIGINT during a 60 s grace stops the worker at once, releasing its jobs."""
    job_ids = _hang_jobs(db_url, 2)
    worker = _Worker(db_url, tmp_path, grace_s=60)
    worker.wait_for("two handler starts", lambda: worker.started(2))
    worker.process.send_signal(signal.SIGINT)
    worker.wait_for("the stopping message", worker.stopping)
    signalled = time.monotonic()
    worker.process.send_signal(signal.SIGINT)
    code = worker.wait(30)
    took = time.monotonic() - signalled
    print(f"\nsecond SIGINT: exited after {took:.2f}s (code {code})")
    assert code == 0, worker.stderr_path.read_text()
    assert took < 10, "the second signal must not wait out the 60 s grace"
    assert "stopped at once" in worker.stderr_path.read_text()
    _assert_released_unconsumed(db_url, job_ids)
