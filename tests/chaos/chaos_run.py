"""One chaos run: enqueue a load, start a fleet of worker processes, let a fault plan loose,
wait for the work to end, then judge the run from its history and side log alone.

:func:`run_chaos` returns a :class:`ChaosReport`: the figures (faults by kind, jobs, lost,
double successes, handler runs beyond one per job and why, recovery times) and the
violations per invariant. A test prints the figures and asserts that no invariant broke.
Waiting is on what the ledger says (jobs finished, leases gone), each wait bounded; a wait
that runs out is itself a violation ("stalled"), and the run still ends and is judged.
"""

from __future__ import annotations

import contextlib
import json
import random
import subprocess
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any
from uuid import UUID

import psycopg
from chaos_app import registry
from chaos_faults import JOBLEDGER, REPO_ROOT, FaultLog, Fleet, WorkerSettings
from chaos_history import (
    Attempt,
    HandlerStart,
    dropped_outcome,
    extra_run_reasons,
    read_side_log,
    render,
    start_violation,
    walk,
)

from ledger import EnqueueRequest, JobStatus, Ledger
from ledger.core.codec import Record
from ledger.runtime.definitions import sync_definitions
from ledger.runtime.retrying import longest_wait

RECOVERY_SLACK_S = 2.0
"""Beyond one lease plus one reaper interval, what a recovery may take on a loaded 2-core
host: a reaper pass's own transaction, the process scheduler, the completer's batching."""


@dataclass(frozen=True)
class Load:
    """``jobs`` short jobs: half async, half sync handlers; some report progress, some fail
    retryably once (``seed`` makes the mix and the fault plan's choices reproducible)."""

    jobs: int
    seed: int = 0
    progress_share: float = 0.3
    flaky_share: float = 0.1
    work_ms: tuple[int, int] = (5, 40)

    def requests(self) -> list[EnqueueRequest]:
        rng = random.Random(self.seed)
        return [
            EnqueueRequest(
                job_type=rng.choice(["chaos.async", "chaos.sync"]),
                payload={
                    "n": n,
                    "ms": rng.randint(*self.work_ms),
                    "progress": rng.random() < self.progress_share,
                    "flaky": rng.random() < self.flaky_share,
                },
            )
            for n in range(self.jobs)
        ]


@dataclass
class Chaos:
    """What a fault plan works with: the fleet, the fault log, a seeded RNG and bounded waits
    on the ledger's own state."""

    url: str
    fleet: Fleet
    faults: FaultLog
    rng: random.Random
    job_ids: list[UUID]
    stalls: list[str] = field(default_factory=list)
    _ledger: Ledger | None = None

    def states(self) -> dict[UUID, Any]:
        """Every job's current state (reopening the ledger if its connections were lost)."""
        try:
            if self._ledger is None:
                self._ledger = Ledger.open(self.url, pool_size=1)
            return self._ledger.get_many(self.job_ids)
        except Exception:  # the server may be restarting: the next poll reopens
            self.close()
            return {}

    def finished(self) -> int:
        return sum(1 for s in self.states().values() if not s.status.is_live)

    def wait_until(self, what: str, predicate: Callable[[], bool], timeout_s: float) -> bool:
        """Poll ``predicate`` (a read of the ledger) until true; a timeout is a stall."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if predicate():
                return True
            time.sleep(0.1)
        states = self.states()
        counts = Counter(str(s.status) for s in states.values())
        leased = [
            f"{job_id} {s.worker_id} expires {s.lease_expires_at}"
            for job_id, s in states.items()
            if s.status == JobStatus.LEASED
        ][:10]
        self.stalls.append(
            f"stalled waiting for {what} after {timeout_s:g}s: {dict(counts)}\n"
            f"  leased: {leased}\n{self.server_sessions()}"
        )
        return False

    def server_sessions(self) -> str:
        """The database's other sessions, as the server sees them (why a stall stalls)."""
        if not self.url.startswith("postgresql"):
            return ""
        query = (
            "SELECT pid, application_name, state, wait_event_type, wait_event,"
            " round(extract(epoch FROM clock_timestamp() - state_change)::numeric, 2) AS silent_s,"
            " round(extract(epoch FROM clock_timestamp() - xact_start)::numeric, 2) AS xact_s,"
            " pg_blocking_pids(pid) AS blocked_by, left(query, 90) AS query"
            " FROM pg_stat_activity WHERE datname = current_database()"
            " AND pid <> pg_backend_pid() ORDER BY pid"
        )
        try:
            with psycopg.connect(self.url, autocommit=True) as conn:
                rows = conn.execute(query).fetchall()
        except psycopg.Error as exc:
            return f"  sessions: unreadable ({exc})"
        return "\n".join(f"  session {row}" for row in rows)

    def wait_finished(self, fraction: float, timeout_s: float) -> bool:
        target = int(len(self.job_ids) * fraction)
        return self.wait_until(
            f"{fraction:.0%} of jobs finished", lambda: self.finished() >= target, timeout_s
        )

    def leases_of(self, worker_id: str) -> int:
        return sum(
            1
            for s in self.states().values()
            if s.status == JobStatus.LEASED and s.worker_id == worker_id
        )

    def stopped_windows(self, worker_id: str) -> list[tuple[datetime, datetime]]:
        """When ``worker_id`` was stopped: each SIGSTOP to its SIGCONT."""
        windows = []
        for stop in self.faults.of_kind("sigstop"):
            if stop.worker_id != worker_id:
                continue
            resume = min(
                (f.at for f in self.faults.of_kind("sigcont")
                 if f.worker_id == worker_id and f.at >= stop.at),
                default=datetime.max.replace(tzinfo=stop.at.tzinfo),
            )  # fmt: skip
            windows.append((stop.at, resume))
        return windows

    def cut_windows(self, worker_id: str) -> list[tuple[datetime, datetime]]:
        """When ``worker_id``'s host was cut off the network: each ``netcut`` to its
        ``netback`` (the process ran on, but nothing it sent arrived)."""
        windows = []
        for cut in self.faults.of_kind("netcut"):
            if cut.worker_id != worker_id:
                continue
            back = min(
                (f.at for f in self.faults.of_kind("netback")
                 if f.worker_id == worker_id and f.at >= cut.at),
                default=datetime.max.replace(tzinfo=cut.at.tzinfo),
            )  # fmt: skip
            windows.append((cut.at, back))
        return windows

    def leased_to(self, worker_id: str) -> list[UUID]:
        """The jobs leased to ``worker_id`` right now, as the ledger says."""
        return [
            job_id
            for job_id, s in self.states().items()
            if s.status == JobStatus.LEASED and s.worker_id == worker_id
        ]

    def frozen_windows(self) -> list[tuple[datetime, datetime]]:
        """When a stopped worker held SQLite's write lock: from its SIGSTOP to its SIGCONT."""
        return [
            window
            for frozen in self.faults.of_kind("write_lock_frozen")
            for window in self.stopped_windows(frozen.worker_id or "")
            if window[0] <= frozen.at <= window[1]
        ]

    def outage_windows(self, reconnect_s: float) -> list[tuple[datetime, datetime]]:
        """When the server was down: from each restart's stop to ``reconnect_s`` after it
        accepted connections again (the longest a worker's write waits between two tries,
        so its first try after the outage may land that late)."""
        backs = [f.at for f in self.faults.of_kind("postgres_back")]
        windows = []
        for stop in self.faults.of_kind("postgres_restart"):
            back = min((at for at in backs if at >= stop.at), default=None)
            end = datetime.max.replace(tzinfo=stop.at.tzinfo)
            if back is not None:
                end = back + timedelta(seconds=reconnect_s)
            windows.append((stop.at, end))
        return windows

    def close(self) -> None:
        if self._ledger is not None:
            with contextlib.suppress(Exception):  # its connections may be gone already
                self._ledger.close()
            self._ledger = None


FaultPlan = Callable[[Chaos], None]
DEFAULT_SETTINGS = WorkerSettings()


@dataclass
class ChaosReport:
    backend: str
    jobs: int
    seed: int
    faults: dict[str, int]
    seconds: float = 0.0
    lost: int = 0
    dead: int = 0
    double_successes: int = 0
    handler_runs: int = 0
    runs_beyond_one: dict[str, int] = field(default_factory=dict)
    recoveries: int = 0
    worst_recovery_s: float | None = None
    worst_recovery_past_expiry_s: float | None = None
    recovery_bound_s: float = 0.0
    violations: dict[str, list[str]] = field(default_factory=dict)

    def add(self, invariant: str, evidence: str) -> None:
        self.violations.setdefault(invariant, []).append(evidence)

    def figures(self) -> str:
        shown = {k: v for k, v in vars(self).items() if k != "violations"}
        shown["violations"] = {k: len(v) for k, v in self.violations.items()}
        return json.dumps(shown, default=str)

    def failure_message(self, samples: int = 3) -> str:
        parts = [f"chaos invariants broken on {self.backend}: {self.figures()}"]
        for invariant, evidence in self.violations.items():
            parts.append(f"--- {invariant}: {len(evidence)}")
            parts.extend(evidence[:samples])
        return "\n".join(parts)


def run_chaos(
    url: str,
    work_dir: Path,
    *,
    backend: str,
    load: Load,
    plan: FaultPlan,
    workers: int = 3,
    settings: WorkerSettings = DEFAULT_SETTINGS,
    finish_timeout_s: float = 60.0,
    fleet_of: Callable[[str, int, WorkerSettings, Path], Fleet] = Fleet,
) -> ChaosReport:
    """Run ``plan`` against ``workers`` worker processes working ``load``; judge the run
    (``fleet_of``: what starts the worker processes, e.g. one in a network namespace each)."""
    log_dir = work_dir / "side-log"
    log_dir.mkdir(parents=True, exist_ok=True)
    with Ledger.open(url) as ledger:
        sync_definitions(ledger, registry)
        requests = load.requests()
        job_ids = [
            job_id
            for chunk in range(0, len(requests), 500)
            for job_id in [
                e.job_id for e in ledger.enqueue_many(requests[chunk : chunk + 500]) if e.created
            ]
        ]
    started = time.monotonic()
    fleet = fleet_of(url, workers, settings, log_dir)
    chaos = Chaos(url, fleet, FaultLog(), random.Random(load.seed), job_ids)
    report = ChaosReport(backend, len(job_ids), load.seed, {})
    try:
        plan(chaos)
        chaos.wait_until(
            "every job to finish",
            lambda: chaos.finished() == len(job_ids),
            finish_timeout_s,
        )
        for worker in fleet.crashed():
            report.add("worker survived", f"{worker.worker_id} exited by itself:\n"
                       f"{worker.stderr_tail()}")  # fmt: skip
        exits = fleet.stop_all(timeout_s=settings.grace_s + 15)
    finally:
        chaos.close()
        fleet.kill_everything()
    report.seconds = round(time.monotonic() - started, 1)
    report.jobs = len(job_ids)  # a plan may have enqueued more
    report.faults = chaos.faults.by_kind()
    for stall in chaos.stalls:
        report.add("progress", stall)
    for worker in fleet.slots:
        code = exits.get(worker.worker_id)
        if code != 0:
            outcome = "did not exit (killed)" if code is None else f"exited {code}"
            report.add(
                "clean shutdown",
                f"{worker.worker_id} {outcome} on SIGTERM; stderr:\n{worker.stderr_tail()}",
            )
    judge(url, chaos, settings, read_side_log(log_dir), report)
    return report


def judge(
    url: str,
    chaos: Chaos,
    settings: WorkerSettings,
    starts: Sequence[HandlerStart],
    report: ChaosReport,
) -> None:
    """Every invariant, from the history and the side log alone."""
    attempts: dict[tuple[UUID, int, int], Attempt] = {}
    histories: dict[UUID, list[Record]] = {}
    with Ledger.open(url) as ledger:
        states = ledger.get_many(chaos.job_ids)
        for job_id in chaos.job_ids:
            records = histories[job_id] = ledger.history(job_id)
            job = walk(job_id, records)
            attempts.update((a.key, a) for a in job.attempts)
            state = states[job_id]
            if state.status.is_live:
                report.add(
                    "every job terminal", f"job {job_id} is {state.status}\n{render(records)}"
                )
            if state.status != JobStatus.SUCCEEDED:
                report.lost += 1
                report.dead += state.status == JobStatus.DEAD
            if job.successes > 1:
                report.double_successes += 1
                report.add("none succeeded twice", f"job {job_id}\n{render(records)}")
            for breach in job.breaches:
                report.add("no write outside a live lease", f"{breach}\n{render(records)}")
    frozen = chaos.frozen_windows() + chaos.outage_windows(
        longest_wait(timedelta(seconds=settings.lease_s))
    )
    finishes = [s for s in starts if s.finished]
    starts = [s for s in starts if not s.finished]
    report.handler_runs = len(starts)
    report.runs_beyond_one = dict(extra_run_reasons(list(starts), attempts))
    for finish in finishes:
        killed = [
            (f.at, f.landed_by or f.at)
            for f in chaos.faults.of_kind("sigkill")
            if f.worker_id == finish.worker_id
        ]
        lost = dropped_outcome(
            finish,
            attempts.get((finish.job_id, finish.run, finish.attempt)),
            killed,
            # A host cut off the network is, to the ledger, a worker stopped: its outcome
            # could not arrive before its lease ended.
            chaos.stopped_windows(finish.worker_id) + chaos.cut_windows(finish.worker_id),
            frozen,
        )
        if lost is not None:
            # The evidence a wrong call would need: every kill of the worker, and what its
            # process logged about the job.
            kills = ", ".join(f"{sent.isoformat()}..{gone.isoformat()}" for sent, gone in killed)
            said = chaos.fleet.log_lines(finish.worker_id, str(finish.job_id))
            report.add(
                "no finished outcome dropped",
                f"{lost}\n  kills of {finish.worker_id}: {kills or 'none'}\n"
                f"{render(histories[finish.job_id])}\n  its log:\n{said}",
            )
    for start in starts:
        attempt = attempts.get((start.job_id, start.run, start.attempt))
        stopped = chaos.stopped_windows(start.worker_id)
        problem = start_violation(start, attempt, stopped, timedelta(seconds=settings.lease_s))
        if problem is not None:
            evidence = f"{problem}\n{render(histories.get(start.job_id, []))}"
            report.add("no handler started on an expired lease", evidence)
    measure_recovery(chaos, settings, attempts, report)
    for command in (["projections", "verify"], ["replay", "--check", "--all"]):
        done = subprocess.run(
            [JOBLEDGER, "--db", url, *command],
            check=False,
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
            timeout=300,
        )
        if done.returncode != 0:
            report.add(
                " ".join(command),
                f"exit {done.returncode}: {done.stdout[-2000:]}{done.stderr[-2000:]}",
            )


def measure_recovery(
    chaos: Chaos,
    settings: WorkerSettings,
    attempts: dict[tuple[UUID, int, int], Attempt],
    report: ChaosReport,
) -> None:
    """Every lease a killed, stopped or cut-off worker held must end within one lease plus one
    reaper interval (plus :data:`RECOVERY_SLACK_S`) of the fault.

    On SQLite, one exception that no runtime can remove: a worker stopped while it holds the
    database's single write lock (the plan saw it: a ``write_lock_frozen`` fault) holds every
    writer, reapers included, until it resumes; its leases must then end within one reaper
    interval (plus slack) of the resume.
    """
    report.recovery_bound_s = settings.lease_s + settings.reaper_interval_s + RECOVERY_SLACK_S
    frozen_since = {start for start, _ in chaos.frozen_windows()}
    worst: float | None = None
    worst_past_expiry: float | None = None
    faults = ("sigkill", "sigstop", "netcut")
    for fault in [f for kind in faults for f in chaos.faults.of_kind(kind)]:
        deadline = fault.at + timedelta(seconds=report.recovery_bound_s)
        resumed = next(
            (
                f.at
                for f in chaos.faults.of_kind("sigcont")
                if f.worker_id == fault.worker_id and f.at > fault.at
            ),
            None,
        )
        if fault.at in frozen_since and resumed is not None:
            deadline = max(
                deadline, resumed + timedelta(seconds=settings.reaper_interval_s + RECOVERY_SLACK_S)
            )
        held = [
            a for a in attempts.values() if a.worker_id == fault.worker_id and a.held_at(fault.at)
        ]
        for attempt in held:
            report.recoveries += 1
            if attempt.ended_at is None:
                report.add(
                    "leases recovered",
                    f"job {attempt.job_id}: {fault.worker_id}'s lease never ended",
                )
                continue
            took = (attempt.ended_at - fault.at).total_seconds()
            past_expiry = (attempt.ended_at - attempt.expires_at).total_seconds()
            worst = took if worst is None else max(worst, took)
            worst_past_expiry = (
                past_expiry if worst_past_expiry is None else max(worst_past_expiry, past_expiry)
            )
            if attempt.ended_at > deadline:
                report.add(
                    "leases recovered",
                    f"job {attempt.job_id}: {fault.kind} of {fault.worker_id} at {fault.at}, "
                    f"lease (expiring {attempt.expires_at}) ended {attempt.ended_by} after "
                    f"{took:.2f}s, past the deadline {deadline}",
                )
    report.worst_recovery_s = None if worst is None else round(worst, 3)
    report.worst_recovery_past_expiry_s = (
        None if worst_past_expiry is None else round(worst_past_expiry, 3)
    )
