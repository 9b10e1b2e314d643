"""The boot reap of a starting pool (defect 7 of issue 12): it releases only the claims a dead
process of *this pool on this host* left, on both backends; and, with the reaper, it never
touches another host's live lease (issue 13, workers on several hosts).

A pid means something only on the host that issued it, and another pool's claims are that
pool's to recover: the worker-id prefix ``<pool>@<host>:`` is what keeps a pool from
releasing live claims of ``default@other-host:<pid>`` (a job run twice on a multi-host
deployment), so these tests name other hosts and other pools explicitly, with pids that are
dead here.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from uuid import UUID

import pytest

from ledger import FakeClock, JobStatus, Ledger
from ledger.maintenance.reaper import Reaper
from ledger.runtime.config import PoolConfig
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


def _claim_as(ledger: Ledger, worker_id: str, lease_s: float = 3600) -> UUID:
    """Enqueue one job and have ``worker_id`` claim it (by default a long lease: only the
    boot reap, not the reaper, could take it back)."""
    job_id = ledger.enqueue(JOB_TYPE, {"worker": worker_id}).job_id
    assert job_id is not None
    [claim] = ledger.claim(worker_id, types=[JOB_TYPE], lease_s=lease_s)
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


async def test_neither_the_boot_reap_nor_the_reaper_touches_another_hosts_live_lease(
    ledger: Ledger, clock: FakeClock
) -> None:
    """Another host's worker (same pool name, a pid that is dead here) holds a live 30 s
    lease: a pool booting here, and the reaper's passes up to the lease's last instant, leave
    it leased to that worker with its history unchanged; the first pass after the lease ends
    reaps it, so the passes did look at it."""
    ledger.define(JOB_TYPE)
    host = process_worker_id("default").rpartition(":")[0].partition("@")[2]
    elsewhere = f"default@other-{host}:{_dead_pid()}"
    job_id = _claim_as(ledger, elsewhere, lease_s=30)
    state = ledger.get(job_id)
    assert state is not None and state.lease_expires_at is not None
    expires, events = state.lease_expires_at, len(ledger.history(job_id))

    pool = WorkerPool(ledger, Registry(), concurrency=0, reaper_interval_s=0, define_types=False)
    reaper = Reaper(ledger, pool.config.reaper_config())  # the pass the pool runs each interval
    assert reaper.run_once().reaped == []
    clock.advance(15)
    await pool.start()
    await pool.stop()
    assert reaper.run_once().reaped == []
    clock.set(expires)  # the lease's last instant: still live (it ends once now passes it)
    assert reaper.run_once().reaped == []

    kept = ledger.get(job_id)
    assert kept is not None and kept.status is JobStatus.LEASED
    assert (kept.worker_id, kept.lease_expires_at) == (elsewhere, expires)
    assert len(ledger.history(job_id)) == events

    clock.advance(0.001)
    assert [reaped.job_id for reaped in reaper.run_once().reaped] == [job_id]


async def test_a_pool_given_a_host_id_boot_reaps_only_under_it(ledger: Ledger) -> None:
    """Two hosts that share a hostname and a pid (containers on the host's network) are told
    apart by their host ids: a pool booting as host-b releases host-b's dead claim and
    leaves host-a's, whose pid is just as dead here, leased; its worker id carries its id."""
    ledger.define(JOB_TYPE)
    dead = _dead_pid()
    on_a = _claim_as(ledger, f"default@host-a:{dead}")
    on_b = _claim_as(ledger, f"default@host-b:{dead}")

    pool = WorkerPool(
        ledger, Registry(), concurrency=0, reaper_interval_s=0, define_types=False, host="host-b"
    )
    assert pool.worker_id == f"default@host-b:{os.getpid()}"
    await pool.start()
    await pool.stop()

    states = ledger.get_many([on_a, on_b])
    assert (states[on_a].status, states[on_a].worker_id) == (
        JobStatus.LEASED,
        f"default@host-a:{dead}",
    )
    assert (states[on_b].status, states[on_b].worker_id) == (JobStatus.PENDING, None)


@pytest.mark.parametrize("host", ["", "a:b", "a@b", "a b"])
def test_a_host_id_cannot_hold_the_worker_ids_separators(host: str) -> None:
    """An empty host id, or one with '@', ':' or whitespace, is refused."""
    with pytest.raises(ValueError, match="host id"):
        PoolConfig(host=host)
