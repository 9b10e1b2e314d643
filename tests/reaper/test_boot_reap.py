"""The boot reap of a starting pool (defect 7 of issue 12): it releases only the claims a dead
process of *this pool on this host* left, on both backends.

A pid means something only on the host that issued it, and another pool's claims are that
pool's to recover: the worker-id prefix ``<pool>@<host>:`` is what keeps a pool from
releasing live claims of ``default@other-host:<pid>`` (a job run twice on a multi-host
deployment), so these tests name other hosts and other pools explicitly, with pids that are
dead here.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from uuid import UUID

import pytest

from ledger import JobStatus, Ledger
from ledger.runtime.handlers import Registry
from ledger.runtime.pool import WorkerPool, process_worker_id

JOB_TYPE = "boot.reap"


def _dead_pid() -> int:
    """The pid of a child process that has exited (and been waited for)."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


@pytest.fixture
def live_pid() -> Iterator[int]:
    """The pid of a live child process (not this one: the pool treats its own pid as live
    without asking the operating system)."""
    child = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"],
                             stdin=subprocess.PIPE)  # fmt: skip
    yield child.pid
    assert child.stdin is not None
    child.stdin.close()
    child.wait(timeout=10)


def _claim_as(ledger: Ledger, worker_id: str) -> UUID:
    """Enqueue one job and have ``worker_id`` claim it (a long lease: only the boot reap,
    not the reaper, could take it back)."""
    job_id = ledger.enqueue(JOB_TYPE, {"worker": worker_id})
    assert job_id is not None
    [claim] = ledger.claim(worker_id, types=[JOB_TYPE], lease_s=3600)
    assert claim.job_id == job_id
    return job_id


async def test_boot_reap_releases_only_this_pools_dead_claims_on_this_host(
    ledger: Ledger, live_pid: int
) -> None:
    """A pool boots while jobs are leased by default@other-host:<pid dead here>,
    otherpool@<this host>:<dead pid>, default@<this host>:<live pid> and
    default@<this host>:<dead pid>: only the last goes back to pending (attempt given back)."""
    ledger.define(JOB_TYPE)
    here = process_worker_id("default").rpartition(":")[0]  # default@<this host>
    host = here.partition("@")[2]
    dead = _dead_pid()
    other_host = _claim_as(ledger, f"default@other-{host}:{dead}")
    other_pool = _claim_as(ledger, f"otherpool@{host}:{dead}")
    live_here = _claim_as(ledger, f"{here}:{live_pid}")
    dead_here = _claim_as(ledger, f"{here}:{dead}")

    pool = WorkerPool(ledger, Registry(), concurrency=0, reaper_interval_s=0, define_types=False)
    await pool.start()
    await pool.stop()

    states = ledger.get_many([other_host, other_pool, live_here, dead_here])
    kept = {job: states[job].worker_id for job in (other_host, other_pool, live_here)}
    assert kept == {
        other_host: f"default@other-{host}:{dead}",
        other_pool: f"otherpool@{host}:{dead}",
        live_here: f"{here}:{live_pid}",
    }
    assert all(states[job].status is JobStatus.LEASED for job in kept)
    released = states[dead_here]
    assert released.status is JobStatus.PENDING
    assert (released.worker_id, released.attempt) == (None, 0)
    assert [type(r.event).name for r in ledger.history(dead_here)][-1] == "job_released"
    assert ledger.projections().verify().clean
