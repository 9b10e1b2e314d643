"""A concurrency limit across real worker processes, checked from the history."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from uuid import UUID

from ledger import EnqueueRequest, Ledger
from ledger.core.codec import Record
from ledger.core.events import (
    JobCancelled,
    JobDeadLettered,
    JobFailed,
    JobLeased,
    JobReleased,
    JobSucceeded,
)

HERE = Path(__file__).parent
JOBS = 60
LIMIT = 2

# Events that end a lease (an attempt): the fold's ways out of `leased`. A failure is
# followed by its retry or dead letter in the same transaction; the failure itself ends it.
_ENDS = (JobSucceeded, JobFailed, JobReleased, JobDeadLettered, JobCancelled)


def most_live_leases(records: list[Record]) -> int:
    """The most leases alive at once, walking the log in order: +1 at each lease, -1 at the
    event that ends it. A claim counted the live leases after every finish that had
    committed, so a lease never precedes (in the log) an end it relied on."""
    live: set[UUID] = set()
    most = 0
    for record in records:
        if isinstance(record.event, JobLeased):
            assert record.originator_id not in live
            live.add(record.originator_id)
            most = max(most, len(live))
        elif isinstance(record.event, _ENDS):
            live.discard(record.originator_id)
    return most


def _worker(url: str, name: str, log: Path) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE), *sys.path])}
    command = [
        str(Path(sys.executable).parent / "jobledger"),
        "--db",
        url,
        "worker",
        "--app",
        "limits_app:registry",
        "--concurrency",
        "4",
        "--poll",
        "0.05",
        "--host-id",
        name,
    ]
    with log.open("wb") as stderr:
        return subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=stderr)


def _wait_started(workers: list[subprocess.Popen[bytes]], logs: list[Path]) -> None:
    """Until every worker has said it runs (its first line: "N workers for …"), so the
    jobs are enqueued for both, not worked off by the first before the second starts."""
    deadline = time.monotonic() + 60
    while not all(b"workers for" in log.read_bytes() for log in logs):
        assert time.monotonic() < deadline, [log.read_text() for log in logs]
        assert all(w.poll() is None for w in workers), [log.read_text() for log in logs]
        time.sleep(0.05)  # polling a process's start, not ordering the test's steps


def test_a_limit_of_two_holds_across_two_worker_processes(db_url: str, tmp_path: Path) -> None:
    """Two processes of four slots each never hold more than two leases of a type limited
    to two at once (from the history), and both reach it: the limit, not luck, held."""
    with Ledger.open(db_url) as ledger:
        ledger.define("limited.work", concurrency=LIMIT)
        logs = [tmp_path / f"worker-{n}.log" for n in range(2)]
        workers = [_worker(db_url, f"host-{n}", log) for n, log in enumerate(logs)]
        try:
            _wait_started(workers, logs)
            ids = [
                e.job_id
                for e in ledger.enqueue_many(
                    [
                        EnqueueRequest(job_type="limited.work", payload={"ms": 10})
                        for _ in range(JOBS)
                    ]
                )
            ]
            deadline = time.monotonic() + 60
            while ledger.counts().get("succeeded", 0) < JOBS:
                assert time.monotonic() < deadline, ledger.counts()
                assert all(w.poll() is None for w in workers), "a worker exited"
                time.sleep(0.05)  # polling the outcome, not ordering steps
        finally:
            for worker in workers:
                worker.send_signal(signal.SIGTERM)
            for worker in workers:
                worker.wait(timeout=30)
        with ledger.store.read_snapshot() as tables:
            records = tables.in_log_order(ids)
    processes = {
        r.event.worker_id.rsplit(":", 1)[-1] for r in records if isinstance(r.event, JobLeased)
    }
    assert len(processes) == 2  # both processes claimed
    assert most_live_leases(records) == LIMIT
