"""Finished work survives the database going away: a connection drop and a short restart.

The ledger's connections are dropped (``pg_terminate_backend`` on the test's own database)
or its server is restarted (a throwaway cluster of the test's own, never the shared server)
after the handlers finished and before their outcomes were recorded. Every outcome must
still be recorded, on its first attempt, with each handler having run once; an outcome whose
lease ran out while the database was away is given up, for the reaper.
"""

from __future__ import annotations

import asyncio
import logging
import os
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pg_faults import ThrowawayCluster, drop_connections, fill_pool

from ledger import EnqueueRequest, FakeClock, JobStatus, Ledger
from ledger.api.ledger import Completion
from ledger.core.errors import DatabaseUnusableError
from ledger.core.events import JobFailed, JobStageChanged
from ledger.core.state import JobState
from ledger.runtime.completer import BatchCompleter
from ledger.runtime.handlers import JobContext, Registry, SyncJobContext
from ledger.runtime.pool import WorkerPool
from ledger.runtime.retrying import TRIES_PER_LEASE
from ledger.store.postgres import PostgresStore
from ledger.store.postgres.checkout import POOL_WAIT_S

pytestmark = pytest.mark.postgres

JOBS = 4


@pytest.fixture
def cluster() -> Iterator[ThrowawayCluster]:
    """A PostgreSQL server of this test's own, removed afterwards."""
    server = ThrowawayCluster()
    try:
        yield server
    finally:
        server.remove()


def assert_each_succeeded_once(ledger: Ledger, job_ids: list[Any]) -> None:
    """Every job succeeded on attempt 1 and its history holds no failure."""
    for job_id in job_ids:
        state = ledger.get(job_id)
        assert state is not None and state.status == JobStatus.SUCCEEDED, state
        assert state.attempt == 1
        assert not [e for e in ledger.store.job_events(job_id) if isinstance(e, JobFailed)]


async def test_a_connection_drop_before_the_completion_loses_no_outcome(
    pg_url: str, clock: FakeClock
) -> None:
    """The ledger's connections dropped after the handlers finished: every outcome is still
    recorded, no attempt consumed, each handler run once."""
    registry = Registry()
    runs: list[int] = []
    all_running, dropped = asyncio.Event(), asyncio.Event()
    with Ledger.open(pg_url, clock=clock, pool_size=4) as ledger:

        @registry.handler("drop")
        async def finish_after_the_drop(ctx: JobContext) -> int:
            runs.append(int(ctx.payload["i"]))
            if len(runs) == JOBS:
                all_running.set()
            await all_running.wait()
            if ctx.payload["i"] == 0:
                await asyncio.to_thread(fill_pool, ledger.store, 8)
                await asyncio.to_thread(drop_connections, pg_url)
                dropped.set()
            await dropped.wait()
            return int(ctx.payload["i"])

        ledger.define("drop")
        job_ids = [
            job_id
            for job_id in [
                e.job_id
                for e in ledger.enqueue_many(
                    [EnqueueRequest(job_type="drop", payload={"i": i}) for i in range(JOBS)]
                )
            ]
        ]
        pool = WorkerPool(ledger, registry, concurrency=JOBS, poll_interval_s=30.0, lease_s=60.0)
        await pool.start()
        await asyncio.wait_for(dropped.wait(), timeout=30)
        await asyncio.wait_for(pool.stop(), timeout=60)
        assert sorted(runs) == list(range(JOBS))
        assert_each_succeeded_once(ledger, [j for j in job_ids if j is not None])


APP = textwrap.dedent(
    """
    import asyncio, os, pathlib, uuid
    from ledger.runtime.handlers import Registry

    registry = Registry()
    MARKS = pathlib.Path(os.environ["JL_MARKS"])

    @registry.handler("restart")
    async def finish_when_told(ctx):
        (MARKS / f"ran-{ctx.payload['i']}-{uuid.uuid4().hex}").touch()
        while not (MARKS / "finish").exists():
            await asyncio.sleep(0.01)
        return ctx.payload["i"]
    """
)


class LogWatch:
    """A child's stderr lines as they come, with a wait for a line containing some text."""

    def __init__(self, stream: Any) -> None:
        self.lines: list[tuple[float, str]] = []
        self._changed = threading.Condition()
        self._thread = threading.Thread(target=self._read, args=(stream,), daemon=True)
        self._thread.start()

    def _read(self, stream: Any) -> None:
        for line in stream:
            with self._changed:
                self.lines.append((time.monotonic(), line))
                self._changed.notify_all()

    def wait_for(self, text: str, *, count: int = 1, timeout: float = 60.0) -> float:
        """The monotonic time the ``count``-th line containing ``text`` arrived."""
        with self._changed:
            found = self._changed.wait_for(
                lambda: len([1 for _, line in self.lines if text in line]) >= count, timeout
            )
            assert found, (
                f"fewer than {count} {text!r} lines in:\n{''.join(line for _, line in self.lines)}"
            )
            return [at for at, line in self.lines if text in line][count - 1]


def test_a_server_restart_shorter_than_the_lease_loses_no_outcome(
    cluster: ThrowawayCluster, tmp_path: Path
) -> None:
    """A real ``jobledger worker`` whose server restarts after its handlers finished records
    every outcome once the server is back: no attempt consumed, each handler run once."""
    url = cluster.create_database("jl")
    with Ledger.open(url, create=True) as ledger:
        ledger.define("restart")
        ids = [
            e.job_id
            for e in ledger.enqueue_many(
                [EnqueueRequest(job_type="restart", payload={"i": i}) for i in range(JOBS)]
            )
        ]
    job_ids = [job_id for job_id in ids if job_id is not None]
    (tmp_path / "restart_app.py").write_text(APP)
    marks = tmp_path / "marks"
    marks.mkdir()
    env = {**os.environ, "JL_MARKS": str(marks), "JOBLEDGER_DB": url}
    program = "from jobledger_cli.main import main; main()"
    argv = [sys.executable, "-c", program, "worker", "--app", "restart_app:registry"]
    worker = subprocess.Popen(
        [*argv, "--burst", "--concurrency", str(JOBS), "--lease", "60", "--poll", "0.2"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert worker.stderr is not None
        log = LogWatch(worker.stderr)
        deadline = time.monotonic() + 60
        while len(list(marks.glob("ran-*"))) < JOBS:
            assert worker.poll() is None and time.monotonic() < deadline, log.lines
            time.sleep(0.02)
        cluster.stop()
        down_at = time.monotonic()
        (marks / "finish").touch()
        log.wait_for("completion flush failed", count=2)
        cluster.start()
        up_at = time.monotonic()
        recorded_at = log.wait_for("completion flush recorded")
        worker.wait(timeout=60)
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait()
    assert worker.returncode == 0, "".join(line for _, line in log.lines)
    print(f"down {up_at - down_at:.2f} s; recorded {recorded_at - up_at:.2f} s after the restart")
    assert len(list(marks.glob("ran-*"))) == JOBS
    with Ledger.open(url) as ledger:
        assert_each_succeeded_once(ledger, job_ids)


def completing_while_down(
    ledger: Ledger, cluster: ThrowawayCluster, lease_s: float
) -> tuple[JobState, BatchCompleter]:
    """One job leased for ``lease_s`` and a running completer; then the server is stopped."""
    ledger.define("t")
    ledger.enqueue("t")
    [job] = ledger.claim("w", limit=1, types=["t"], lease_s=lease_s)
    assert job.lease is not None
    completer = BatchCompleter(ledger, lease_s=lease_s, max_delay_s=0.0)
    completer.start()
    cluster.stop()
    return job, completer


async def test_an_outcome_whose_lease_ran_out_while_the_server_was_down_is_given_up(
    cluster: ThrowawayCluster, caplog: pytest.LogCaptureFixture
) -> None:
    """The completer retries while the lease lives and gives up once it expired: the job
    stays leased for the reaper, which owns it from then on."""
    url = cluster.create_database("jl") + "?connect_timeout=1"
    clock = FakeClock()
    with Ledger.open(url, clock=clock, create=True) as ledger:
        job, completer = completing_while_down(ledger, cluster, 30.0)
        assert job.lease is not None
        caplog.set_level(logging.WARNING, logger="ledger.runtime.completer")
        recorded = completer.submit(Completion(job.lease))
        while not [r for r in caplog.records if "completion flush failed" in r.getMessage()]:
            await asyncio.sleep(0.02)
        assert not recorded.done()
        clock.advance(31.0)
        assert await asyncio.wait_for(recorded, timeout=30) is None
        await completer.close()
        cluster.start()
        state = ledger.get(job.job_id)
        assert state is not None and state.status == JobStatus.LEASED


async def test_a_short_lease_is_retried_often_enough_to_meet_the_server_back(
    cluster: ThrowawayCluster, caplog: pytest.LogCaptureFixture
) -> None:
    """With a 0.8 s lease, the completer's back-off between tries stays within a lease / 8
    (not the 2 s cap meant for long leases), so a server back with part of the lease left
    is met; the outcome is then recorded."""
    url = cluster.create_database("jl") + "?connect_timeout=1"
    with Ledger.open(url, clock=FakeClock(), create=True) as ledger:
        job, completer = completing_while_down(ledger, cluster, 0.8)
        assert job.lease is not None
        caplog.set_level(logging.WARNING, logger="ledger.runtime.completer")
        recorded = completer.submit(Completion(job.lease))

        def failed_tries() -> list[str]:
            return [m for r in caplog.records if "flush failed" in (m := r.getMessage())]

        while len(failed_tries()) < 6:
            await asyncio.sleep(0.02)
        cluster.start()
        state = await asyncio.wait_for(recorded, timeout=30)
        await completer.close()
    delays = [float(m.split("again in ")[1].split(" s)")[0]) for m in failed_tries()]
    assert max(delays) <= 0.8 / TRIES_PER_LEASE, delays
    assert state is not None and state.status == JobStatus.SUCCEEDED


def test_the_first_checkout_after_a_restart_does_not_wait_for_the_pools_back_off(
    cluster: ThrowawayCluster,
) -> None:
    """After an outage long enough that the pool's reconnect back-off (1 s, 2 s, 4 s…) puts
    its next try seconds after the server is back, a unit of work still gets a connection
    at once — one of its own — and so does the next, without waiting in the pool again.

    (Found by the chaos suite: outcomes finished before a restart waited in the pool past
    their 3 s lease although the server had been back for half a second.)"""
    url = cluster.create_database("jl")
    ledger = Ledger.open(url, create=True, pool_size=2)
    try:
        assert isinstance(ledger.store, PostgresStore)
        fill_pool(ledger.store)
        cluster.stop()
        with pytest.raises(DatabaseUnusableError):
            ledger.counts()  # the pool meets its dead connections and starts reconnecting
        # The outage itself is the fault: the pool retries at about 1 s and 3 s, then 7 s.
        time.sleep(3.5)
        cluster.start()
        started = time.monotonic()
        assert ledger.counts() == {}
        first = time.monotonic() - started
        pool = ledger.store.datastore.pool
        assert not pool.get_stats().get("pool_available"), "the pool reconnected: no proof"
        started = time.monotonic()
        assert ledger.counts() == {}
        second = time.monotonic() - started
    finally:
        ledger.close()
    print(f"first unit of work {first:.2f} s after the restart, the next {second:.2f} s")
    assert first < POOL_WAIT_S + 1.0, f"waited {first:.2f} s for the pool"
    assert second < POOL_WAIT_S, f"the next one waited {second:.2f} s again"


@pytest.mark.parametrize("kind", ["async", "sync"])
async def test_a_handlers_progress_write_waits_out_a_server_restart(
    cluster: ThrowawayCluster, caplog: pytest.LogCaptureFixture, kind: str
) -> None:
    """A handler reporting progress while the server is down is not failed: its write is
    retried until the server is back, and the job succeeds on its first attempt with the
    progress recorded. (Found by the chaos suite: each restart failed ~20 handlers with
    ``job.handler_error`` for a progress write that met the outage.)"""
    url = cluster.create_database("jl") + "?connect_timeout=1"
    registry = Registry()
    loop = asyncio.get_running_loop()
    about_to_report, server_down = asyncio.Event(), threading.Event()

    def report_when_the_server_is_down(ctx: Any) -> str:
        loop.call_soon_threadsafe(about_to_report.set)
        server_down.wait(30)
        return "reported"

    if kind == "async":

        @registry.handler("progress")
        async def report_async(ctx: JobContext) -> str:
            result = await asyncio.to_thread(report_when_the_server_is_down, ctx)
            await ctx.progress(done=1, total=1, stage="written")
            return result
    else:

        @registry.handler("progress")
        def report_sync(ctx: SyncJobContext) -> str:
            result = report_when_the_server_is_down(ctx)
            ctx.progress(done=1, total=1, stage="written")
            return result

    caplog.set_level(logging.WARNING, logger="ledger.runtime.retrying")
    with Ledger.open(url, create=True, pool_size=2) as ledger:
        ledger.define("progress")
        job_id = ledger.enqueue("progress").job_id
        pool = WorkerPool(ledger, registry, concurrency=1, poll_interval_s=30.0, lease_s=60.0)
        await pool.start()
        await asyncio.wait_for(about_to_report.wait(), timeout=30)
        await asyncio.to_thread(cluster.stop)
        server_down.set()
        while not [r for r in caplog.records if "progress of job" in r.getMessage()]:
            await asyncio.sleep(0.02)
        await asyncio.to_thread(cluster.start)
        await asyncio.wait_for(pool.stop(), timeout=60)
        state = ledger.get(job_id)
        stages = [
            e.stage for e in ledger.store.job_events(job_id) if isinstance(e, JobStageChanged)
        ]
    assert state is not None and state.status == JobStatus.SUCCEEDED, state
    assert state.attempt == 1 and "written" in stages
