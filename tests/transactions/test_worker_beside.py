"""Transactional enqueue with a worker process running: it runs what the application commits,
never what it rolls back, and neither blocks the other for good (SQLite: the application's
``BEGIN IMMEDIATE`` and the worker's claims share one write lock)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from uuid import UUID

import pytest
from app_connections import AppConnection

from ledger import JobStatus, Ledger
from ledger.core.state import JobState

WORKER_SCRIPT = textwrap.dedent(
    """
    import asyncio, sys
    from ledger import Ledger
    from ledger.runtime.handlers import Registry
    from ledger.runtime.pool import WorkerPool

    registry = Registry()

    @registry.handler("t")
    async def t(ctx):
        return {"ran": ctx.job.request.payload.get("n")}

    async def main():
        with Ledger.open(sys.argv[1], pool_size=4) as ledger:
            pool = WorkerPool(ledger, registry, concurrency=2, poll_interval_s=0.05)
            await pool.start()
            print("ready", flush=True)
            await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
            await pool.stop()

    asyncio.run(main())
    """
)


@pytest.fixture
def worker(db_url: str, defined: Ledger) -> Iterator[subprocess.Popen[str]]:
    """A worker process on the test ledger, polling every 50 ms (and LISTENing on PostgreSQL)."""
    process = subprocess.Popen(
        [sys.executable, "-c", WORKER_SCRIPT, db_url],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None and process.stdout.readline().strip() == "ready"
    yield process
    assert process.stdin is not None
    process.stdin.write("\n")
    process.stdin.flush()
    process.wait(timeout=30)


def _finished(ledger: Ledger, job_id: UUID, within_s: float = 30.0) -> JobState:
    """The job's state once the worker process finished it (real time: another process)."""
    deadline = time.monotonic() + within_s
    state = ledger.get(job_id)
    while (state is None or state.status.is_live) and time.monotonic() < deadline:
        time.sleep(0.02)
        state = ledger.get(job_id)
    assert state is not None
    return state


def test_a_worker_process_runs_the_committed_job_and_never_the_rolled_back_one(
    defined: Ledger, db_url: str, worker: subprocess.Popen[str]
) -> None:
    """With the worker claiming meanwhile: the rolled-back job never exists; the committed
    one, enqueued after it, is run; a plain job enqueued while the application's
    transaction is open is run too once that transaction ends."""
    warm = defined.enqueue("t", {"n": 0}).job_id
    assert warm is not None and _finished(defined, warm).status is JobStatus.SUCCEEDED
    app = AppConnection(db_url)
    try:
        app.begin()
        phantom = defined.using(app.conn).enqueue("t", {"n": 1}).job_id
        app.rollback()
        app.begin()
        app.execute("INSERT INTO orders (item) VALUES (?)", ("paid",))
        committed = defined.using(app.conn).enqueue("t", {"n": 2}).job_id
        # Another writer of this process meanwhile (SQLite: it waits for the write lock the
        # application's transaction holds, up to its busy timeout, then goes on).
        plain: list[UUID | None] = []
        other = threading.Thread(target=lambda: plain.append(defined.enqueue("t", {"n": 3}).job_id))
        other.start()
        app.commit()
        other.join(timeout=60)
    finally:
        app.close()
    assert committed is not None and plain and plain[0] is not None
    for job_id in (committed, plain[0]):
        assert _finished(defined, job_id).status is JobStatus.SUCCEEDED
    assert phantom is not None and defined.get(phantom) is None
    assert defined.history(phantom) == []
    report = defined.projections().verify()
    assert report.clean, report
    assert [f for replay in defined.replay_check_all() for f in replay.findings] == []
