"""Fault plans: what a chaos run does to the fleet, and when.

Each plan injects a bounded number of faults, each when the run reaches a share of finished
jobs (so a fault always lands under load, whatever the host's speed), choosing its victim
and its variant with the run's seeded RNG. Every wait is bounded (a stall is recorded, the
plan goes on), so a plan always ends.
"""

from __future__ import annotations

import signal
import sqlite3
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from uuid import UUID

from chaos_faults import ThrowawayPostgres, terminate_backends
from chaos_netns import HostNetwork
from chaos_run import Chaos, FaultPlan, Load

from ledger import JobStatus, Ledger
from ledger.clock import SystemClock
from ledger.store.config import sqlite_path

THRESHOLDS = (0.1, 0.3, 0.5, 0.7)
STEP_TIMEOUT_S = 90.0


def _live_victim(chaos: Chaos, holding: bool) -> int:
    """A random live slot; with ``holding``, one that holds leases right now (waited for)."""
    live = [i for i, w in enumerate(chaos.fleet.slots) if w.alive()]
    chaos.rng.shuffle(live)
    if holding:
        for _ in range(50):
            for index in live:
                if chaos.leases_of(chaos.fleet.slots[index].worker_id) > 0:
                    return index
            time.sleep(0.05)
    return live[0]


def _wait_leases_gone(chaos: Chaos, worker_id: str) -> None:
    settings = chaos.fleet.settings
    bound = settings.lease_s + settings.reaper_interval_s + 10
    chaos.wait_until(f"{worker_id}'s leases reaped", lambda: chaos.leases_of(worker_id) == 0, bound)


def sigkill_and_restart(kills: Sequence[float] = THRESHOLDS) -> FaultPlan:
    """SIGKILL a random worker (one holding leases) at each threshold; restart it at once
    (its successor boot-reaps the claims) or only once the reaper took them back."""

    def plan(chaos: Chaos) -> None:
        for threshold in kills:
            chaos.wait_finished(threshold, STEP_TIMEOUT_S)
            index = _live_victim(chaos, holding=True)
            victim = chaos.fleet.slots[index]
            leases = chaos.leases_of(victim.worker_id)
            kill = chaos.faults.record("sigkill", victim.worker_id, f"{leases} leases")
            victim.send(signal.SIGKILL)
            victim.wait(10)
            chaos.faults.landed(kill)
            if chaos.rng.random() < 0.5:
                _wait_leases_gone(chaos, victim.worker_id)
            chaos.fleet.restart(index)

    return plan


def _wait_stopped(pid: int, timeout_s: float = 5.0) -> None:
    """Wait until the kernel shows ``pid`` stopped (``T`` in ``/proc/<pid>/stat``): a signal
    sent is not yet a signal taken, and a victim still running for a moment after the kill
    could begin a write after the write-lock probe looked. (One run: the probe found the lock
    free, yet every SQLite writer then stalled until the victim resumed 13.5 s later, so the
    victim must have taken it after the probe.)"""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with open(f"/proc/{pid}/stat") as stat:
            state = stat.read().rsplit(")", 1)[1].split()[0]
        if state in ("T", "t"):
            return
        time.sleep(0.001)
    raise AssertionError(f"process {pid} not stopped {timeout_s} s after SIGSTOP")


def sqlite_write_lock_held(url: str, timeout_s: float = 2.0) -> bool:
    """Whether some process holds the SQLite database's write lock for ``timeout_s`` (far
    longer than any healthy write transaction takes)."""
    conn = sqlite3.connect(sqlite_path(url), timeout=timeout_s, isolation_level=None)
    try:
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("ROLLBACK")
        return False
    except sqlite3.OperationalError:
        return True
    finally:
        conn.close()


def sigstop_past_lease(stops: Sequence[float] = (0.2, 0.6)) -> FaultPlan:
    """SIGSTOP a worker holding leases until every one of them was reaped by the others (it
    is past its lease), then SIGCONT it: a zombie waking with work it no longer owns.

    On SQLite the victim may be frozen inside a write transaction: then it holds the
    database's single write lock, no other process can write (reap included) until it
    resumes, and nothing can take the lock from it. That is recorded as a
    ``write_lock_frozen`` fault (the judge exempts what no runtime could have written
    meanwhile), and the victim resumes once its leases have expired."""

    def plan(chaos: Chaos) -> None:
        settings = chaos.fleet.settings
        for threshold in stops:
            chaos.wait_finished(threshold, STEP_TIMEOUT_S)
            victim = chaos.fleet.slots[_live_victim(chaos, holding=True)]
            leases = chaos.leases_of(victim.worker_id)
            chaos.faults.record("sigstop", victim.worker_id, f"{leases} leases")
            victim.process.send_signal(signal.SIGSTOP)
            _wait_stopped(victim.process.pid)
            if not chaos.url.startswith("postgresql") and sqlite_write_lock_held(chaos.url):
                chaos.faults.record("write_lock_frozen", victim.worker_id)
                time.sleep(settings.lease_s + settings.reaper_interval_s)  # past its leases
            else:
                _wait_leases_gone(chaos, victim.worker_id)
            chaos.faults.record("sigcont", victim.worker_id)
            victim.process.send_signal(signal.SIGCONT)

    return plan


def terminate_connections(
    admin_url: str, dbname: str, times: Sequence[float] = THRESHOLDS
) -> FaultPlan:
    """``pg_terminate_backend`` every connection to the ledger's database at each threshold."""

    def plan(chaos: Chaos) -> None:
        for threshold in times:
            chaos.wait_finished(threshold, STEP_TIMEOUT_S)
            killed = terminate_backends(admin_url, dbname)
            chaos.faults.record("pg_terminate_backend", detail=f"{killed} connections")

    return plan


def restart_server(
    server: ThrowawayPostgres, times: Sequence[float] = (0.2, 0.6), down_s: float = 1.0
) -> FaultPlan:
    """Restart the test's own PostgreSQL at each threshold: the first a fast shutdown, the
    next an immediate one (a crash: no checkpoint, connections cut), down ``down_s`` each."""

    def plan(chaos: Chaos) -> None:
        for number, threshold in enumerate(times):
            chaos.wait_finished(threshold, STEP_TIMEOUT_S)
            mode = "fast" if number % 2 == 0 else "immediate"
            chaos.faults.record("postgres_restart", detail=f"{mode} stop, {down_s:g}s down")
            server.stop(mode)
            time.sleep(down_s)  # the outage itself is the fault: its length is wall time
            server.start()
            chaos.faults.record("postgres_back", detail=f"after a {mode} stop")

    return plan


def together(*plans: FaultPlan) -> FaultPlan:
    """The plans one after another (for the soak: every kind of fault in one run)."""

    def plan(chaos: Chaos) -> None:
        for each in plans:
            each(chaos)

    return plan


@dataclass
class NetCut:
    """Cut a worker's host off the network while it holds leases (its veth's root end down),
    keep it cut until the others have reaped its leases and finished those jobs, and for at
    least ``min_cut_s``; restore it, enqueue ``after`` and wait until the host has recorded a
    success of its own again (it found its way back). What it saw is kept for the test."""

    network: HostNetwork
    after: Load
    at: float = 0.2
    min_cut_s: float = 0.0
    victim: str = ""
    held: list[UUID] = field(default_factory=list)
    """The jobs leased to the victim when it was cut off."""
    cut_at: datetime | None = None
    """When the cut was recorded, just before it was made (the workers' clock)."""
    cut_made_at: datetime | None = None
    """When the link was down: nothing the victim sent after this arrived before the restore."""
    back_at: datetime | None = None
    """When the restore was recorded, just after it was made."""
    cut_s: float = 0.0
    back_to_success_s: float | None = None
    """From the restore to the victim's first success recorded after it."""

    def __call__(self, chaos: Chaos) -> None:
        chaos.wait_finished(self.at, STEP_TIMEOUT_S)
        index = _live_victim(chaos, holding=True)
        self.victim = chaos.fleet.slots[index].worker_id
        self.held = chaos.leased_to(self.victim)
        self.cut_at = chaos.faults.record("netcut", self.victim, f"{len(self.held)} leases").at
        self.network.cut(index)
        self.cut_made_at = SystemClock().now()  # the clock the workers stamp events with
        cut_at = time.monotonic()
        try:
            _wait_leases_gone(chaos, self.victim)
            chaos.wait_until(
                "the cut-off host's jobs finished elsewhere",
                lambda: _all_finished(chaos, self.held),
                STEP_TIMEOUT_S,
            )
            left = self.min_cut_s - (time.monotonic() - cut_at)
            if left > 0:
                time.sleep(left)  # the outage itself is the fault: its length is wall time
        finally:
            self.network.restore(index)
            self.back_at = chaos.faults.record("netback", self.victim).at
            self.cut_s = round(time.monotonic() - cut_at, 2)
        back_at = time.monotonic()
        with Ledger.open(chaos.url) as ledger:
            added = [e.job_id for e in ledger.enqueue_many(self.after.requests()) if e.created]
        chaos.job_ids.extend(added)
        if chaos.wait_until(
            f"a success of {self.victim} after its host was restored",
            lambda: _succeeded_by(chaos, added, self.victim),
            STEP_TIMEOUT_S,
        ):
            self.back_to_success_s = round(time.monotonic() - back_at, 2)


def _all_finished(chaos: Chaos, job_ids: Sequence[UUID]) -> bool:
    states = chaos.states()
    return bool(states) and all(not states[job_id].status.is_live for job_id in job_ids)


def _succeeded_by(chaos: Chaos, job_ids: Sequence[UUID], worker_id: str) -> bool:
    states = chaos.states()
    return any(
        states[job_id].status == JobStatus.SUCCEEDED and states[job_id].worker_id == worker_id
        for job_id in job_ids
        if job_id in states
    )
