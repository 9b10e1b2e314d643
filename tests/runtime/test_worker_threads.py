"""Sync handlers and the pool's own database calls never compete for threads (defect 1 of
issue 12), proven with real ``jobledger worker`` processes on both backends."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import uuid
from pathlib import Path

import pytest

from ledger import EnqueueRequest, JobStatus, Ledger

SYNC_APP = textwrap.dedent(
    """
    import time
    from ledger.runtime.handlers import Registry

    registry = Registry()

    @registry.handler("sync.progress")
    def reports_progress(ctx):
        ctx.progress_blocking(stage="running", done=0, total=1)  # the long-standing spelling
        ctx.progress(done=1, total=1)  # in a sync handler, the same blocking call
        return {"i": ctx.payload["i"]}

    @registry.handler("sync.long")
    def runs_long(ctx):
        time.sleep(float(ctx.payload["seconds"]))
        return "done"
    """
)


@pytest.fixture
def sync_app(tmp_path: Path) -> str:
    """A handlers module of sync handlers, importable from ``tmp_path`` under a fresh name."""
    name = f"jl_sync_app_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{name}.py").write_text(SYNC_APP)
    return name


def _burst(url: str, app: str, cwd: Path, *options: str) -> subprocess.CompletedProcess[str]:
    """``jobledger --db URL worker --app APP:registry --burst OPTIONS`` as a real process; a
    hang is cut off by the subprocess timeout (and then fails the test)."""
    script = str(Path(sys.executable).with_name("jobledger"))
    argv = [script, "--db", url, "worker", "--app", f"{app}:registry", "--burst", *options]
    return subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=60, check=False)


@pytest.mark.timeout(90)
def test_a_default_worker_finishes_many_sync_handlers_that_report_progress(
    db_url: str, sync_app: str, tmp_path: Path
) -> None:
    """Twelve sync handlers writing progress (more than asyncio's default thread pool on two
    cores) finish under `jobledger worker --burst` with default flags: no deadlock."""
    with Ledger.open(db_url) as ledger:
        ledger.define("sync.progress")
        ids = [
            e.job_id
            for e in ledger.enqueue_many(
                [EnqueueRequest(job_type="sync.progress", payload={"i": i}) for i in range(12)]
            )
        ]
    done = _burst(db_url, sync_app, tmp_path)
    assert done.returncode == 0, done.stderr
    with Ledger.open(db_url) as ledger:
        for job_id in ids:
            assert job_id is not None
            state = ledger.get(job_id)
            assert state is not None and state.status is JobStatus.SUCCEEDED
            assert (state.progress_done, state.progress_total, state.attempt) == (1, 1, 1)


@pytest.mark.timeout(90)
def test_six_long_sync_handlers_do_not_starve_the_heartbeats(
    db_url: str, sync_app: str, tmp_path: Path
) -> None:
    """Six sync handlers each running past a whole lease: every lease is renewed while its
    handler runs (job_heartbeated events before the success), so each succeeds on attempt 1."""
    with Ledger.open(db_url) as ledger:
        ledger.define("sync.long")
        ids = [
            e.job_id
            for e in ledger.enqueue_many(
                [EnqueueRequest(job_type="sync.long", payload={"seconds": 4.0}) for _ in range(6)]
            )
        ]
    done = _burst(db_url, sync_app, tmp_path, "--lease", "3")
    assert done.returncode == 0, done.stderr
    with Ledger.open(db_url) as ledger:
        for job_id in ids:
            assert job_id is not None
            names = [record.event.name for record in ledger.history(job_id)]
            assert names[-1] == "job_succeeded", names
            renewals = names.count("job_heartbeated")
            assert renewals >= 1, f"no lease renewal during a 4 s handler: {names}"
            state = ledger.get(job_id)
            assert state is not None and state.attempt == 1
