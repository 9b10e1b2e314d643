"""A rate limit across real worker processes (both backends): two `jobledger worker` processes
started together never lease more than the limit within its period (checked from the
history), and a clock a period later refills it."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import uuid
from datetime import timedelta
from pathlib import Path

from ledger import EnqueueRequest, JobStatus, Ledger
from ledger.clock import FakeClock
from ledger.core.events import JobLeased
from ledger.core.rates import parse_rate

JOBLEDGER = str(Path(sys.executable).with_name("jobledger"))

APP = textwrap.dedent(
    """
    from ledger.runtime.handlers import Registry

    registry = Registry()

    @registry.handler("rated.call")
    async def call(ctx):
        return {"ok": True}
    """
)


def test_two_worker_processes_share_one_rate_limit(db_url: str, tmp_path: Path) -> None:
    """5/1h over 20 jobs: two burst workers started at once lease 5 in all (the history's
    leases, all within the period), the other 15 stay pending; the fake clock then refills
    one token per 12 minutes, up to 5; the views and replay hold."""
    with Ledger.open(db_url) as ledger:
        ledger.define("rated.call", rate=parse_rate("5/1h"))
        ids = [
            e.job_id
            for e in ledger.enqueue_many([EnqueueRequest(job_type="rated.call") for _ in range(20)])
        ]
    name = f"jl_rate_app_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{name}.py").write_text(APP)
    argv = [JOBLEDGER, "--db", db_url, "worker", "--app", f"{name}:registry", "--burst"]
    workers = [
        subprocess.Popen(
            [*argv, "--concurrency", "4", "--json"],
            cwd=tmp_path,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    outputs = [worker.communicate(timeout=120) for worker in workers]
    for worker, (_, stderr) in zip(workers, outputs, strict=True):
        assert worker.returncode == 0, stderr
    assert sum(json.loads(stdout)["succeeded"] for stdout, _ in outputs) == 5
    clock = FakeClock()
    with Ledger.open(db_url, clock=clock) as ledger:
        leases = [
            r.event
            for job_id in ids
            for r in ledger.history(job_id)
            if isinstance(r.event, JobLeased)
        ]
        assert len(leases) == 5
        first = min(lease.at for lease in leases)
        assert max(lease.at for lease in leases) - first < timedelta(hours=1)
        assert ledger.counts() == {"succeeded": 5, "pending": 15}
        last = max(lease.at for lease in leases)
        # One token per 12 minutes from the bucket's theoretical arrival time on.
        clock.set(last + timedelta(minutes=11))
        assert ledger.claim("w", limit=20) == []
        clock.set(first + timedelta(minutes=60 - 48 + 1))
        assert len(ledger.claim("w", limit=20)) == 1
        clock.set(first + timedelta(hours=3))  # a long wait refills up to the limit, no more
        refilled = ledger.claim("w", limit=20)
        assert len(refilled) == 5
        assert all(job.status is JobStatus.LEASED for job in refilled)
        report = ledger.projections().verify()
        assert report.clean, report
        assert [f for replay in ledger.replay_check_all() for f in replay.findings] == []
