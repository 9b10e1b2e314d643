"""Reading a chaos run back: each job's attempts (leases) from its history, the fence checks
over every write, and the handler starts of the side log matched against those attempts.

Everything here reads only what a run left behind: the event history and the side log. A
violation is a one-line statement with the job id, followed by that job's history, so a
failing test says which job broke which promise and how.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from uuid import UUID

from ledger.core.codec import Record
from ledger.core.events import (
    JobCancelled,
    JobFailed,
    JobHeartbeated,
    JobLeased,
    JobProgressed,
    JobReleased,
    JobStageChanged,
    JobSucceeded,
)
from ledger.core.values import FailureKind
from ledger.runtime.claims import START_MARGIN

BOOT_REAP_REASON = "released by boot reap"


@dataclass
class Attempt:
    """One lease: a claim, its renewals, and the event that ended it."""

    job_id: UUID
    run: int
    attempt: int
    worker_id: str
    leased_at: datetime
    expiries: list[tuple[datetime, datetime]] = field(default_factory=list)
    """``(event time, lease_expires_at)`` of the claim and of every renewal, in order."""
    ended_at: datetime | None = None
    ended_by: str | None = None
    """``succeeded``, ``failed:<kind>:<code>``, ``released:<reason>`` or ``cancelled``."""

    @property
    def key(self) -> tuple[UUID, int, int]:
        return (self.job_id, self.run, self.attempt)

    @property
    def expires_at(self) -> datetime:
        return self.expiries[-1][1]

    def expiry_known_at(self, moment: datetime) -> datetime | None:
        """The lease's expiry as the ledger had decided it by ``moment``."""
        known = [expires for at, expires in self.expiries if at <= moment]
        return known[-1] if known else None

    def held_at(self, moment: datetime) -> bool:
        return self.leased_at <= moment and (self.ended_at is None or self.ended_at > moment)


def render(records: list[Record]) -> str:
    """A job's history, one event a line, for a violation's evidence."""
    lines = []
    for record in records:
        event = record.event
        parts = [f"  v{record.originator_version} {event.name} at={event.at.isoformat()}"]
        for name in ("run_number", "attempt", "worker_id", "lease_expires_at", "reason"):
            value = getattr(event, name, None)
            if value is not None:
                parts.append(
                    f"{name}={value.isoformat() if hasattr(value, 'isoformat') else value}"
                )
        failure = getattr(event, "failure", None)
        if failure is not None:
            parts.append(f"failure={failure.kind}:{failure.code} {failure.message[:120]!r}")
        lines.append(" ".join(parts))
    return "\n".join(lines)


@dataclass
class JobWalk:
    """What one job's history says: its attempts, successes and fence breaches."""

    job_id: UUID
    records: list[Record]
    attempts: list[Attempt] = field(default_factory=list)
    successes: int = 0
    breaches: list[str] = field(default_factory=list)


def walk(job_id: UUID, records: list[Record]) -> JobWalk:
    """Follow the history event by event, holding the current lease, and note every worker
    write the ledger accepted without a live lease of that very execution (the fence), and
    every reap of a lease that was still live."""
    walker = _Walker(JobWalk(job_id, records))
    for record in records:
        walker.apply(record.event)
    return walker.result


WorkerWrite = (
    JobHeartbeated | JobProgressed | JobStageChanged | JobSucceeded | JobFailed | JobReleased
)


class _Walker:
    def __init__(self, result: JobWalk) -> None:
        self.result = result
        self.current: Attempt | None = None

    def apply(self, event: object) -> None:
        if isinstance(event, JobLeased):
            if self.current is not None:
                self._breach(event, f"while {self.current.worker_id} held a lease")
            self.current = Attempt(
                self.result.job_id, event.run_number, event.attempt, event.worker_id, event.at
            )
            self.current.expiries.append((event.at, event.lease_expires_at))
            self.result.attempts.append(self.current)
        elif isinstance(event, JobHeartbeated):
            self._fence(event)
            if self.current is not None:
                self.current.expiries.append((event.at, event.lease_expires_at))
        elif isinstance(event, JobProgressed | JobStageChanged):
            self._fence(event)
        elif isinstance(event, JobSucceeded):
            self._fence(event)
            self.result.successes += 1
            self._end(event.at, "succeeded")
        elif isinstance(event, JobFailed):
            # The reaper's and the boot reap's failures are not a worker's write: unfenced
            # (the boot reap's, like its releases, may come before or after the expiry).
            if event.failure.kind not in (FailureKind.LEASE_EXPIRED, FailureKind.WORKER_LOST):
                self._fence(event)
            elif self.current is not None and event.at <= self.current.expires_at:
                self._breach(event, f"reaped a live lease (expires {self.current.expires_at})")
            self._end(event.at, f"failed:{event.failure.kind}:{event.failure.code}")
        elif isinstance(event, JobReleased):
            if event.reason != BOOT_REAP_REASON:
                self._fence(event)
            self._end(event.at, f"released:{event.reason}")
        elif isinstance(event, JobCancelled):
            self._end(event.at, "cancelled")

    def _fence(self, event: WorkerWrite) -> None:
        """A worker's write must come from the execution holding the lease, before expiry
        (progress and stage events carry no worker id: their run and attempt must match)."""
        current = self.current
        worker = getattr(event, "worker_id", None)
        if current is None or (current.run, current.attempt) != (event.run_number, event.attempt):
            self._breach(event, f"for run {event.run_number} attempt {event.attempt}, unleased")
        elif worker is not None and worker != current.worker_id:
            self._breach(event, f"by {worker}, lease held by {current.worker_id}")
        elif event.at > current.expires_at:
            self._breach(event, f"after its lease expired at {current.expires_at.isoformat()}")

    def _breach(self, event: WorkerWrite | JobLeased, why: str) -> None:
        self.result.breaches.append(
            f"job {self.result.job_id}: {event.name} at {event.at.isoformat()} {why}"
        )

    def _end(self, at: datetime, how: str) -> None:
        if self.current is not None:
            self.current.ended_at, self.current.ended_by = at, how
        self.current = None


@dataclass(frozen=True)
class HandlerStart:
    """One line of the side log."""

    job_id: UUID
    run: int
    attempt: int
    worker_id: str
    wall: datetime
    seen_expiry: datetime | None
    finished: bool = False
    """A ``finish`` line (the handler returned or raised) rather than a start."""


def read_side_log(directory: Path) -> list[HandlerStart]:
    """Every start and finish line of every worker process, in no particular order."""
    return _read_lines(directory)


def _read_lines(directory: Path) -> list[HandlerStart]:
    """Every handler start logged by every worker process; a line cut short by a SIGKILL is
    skipped (its handler never got past the log write)."""
    starts = []
    for path in sorted(directory.glob("starts-*.jsonl")):
        for line in path.read_text().splitlines():
            try:
                entry = json.loads(line)
            except json.JSONDecodeError:
                continue
            seen = entry["lease_expires_at"]
            starts.append(
                HandlerStart(
                    UUID(entry["job_id"]),
                    entry["run"],
                    entry["attempt"],
                    entry["worker_id"],
                    datetime.fromisoformat(entry["wall"]),
                    datetime.fromisoformat(seen) if seen else None,
                    entry.get("what") == "finish",
                )
            )
    return starts


def start_violation(
    start: HandlerStart,
    attempt: Attempt | None,
    stopped: Sequence[tuple[datetime, datetime]] = (),
    lease: timedelta = timedelta(0),
) -> str | None:
    """Why ``start`` ran a handler without a live lease, or ``None`` if it had one.

    Exempt: a start delayed by a freeze of its own process (``stopped``: its SIGSTOP to
    SIGCONT windows) that spans the last moment the pool's check could have passed (the
    lease's end less :data:`~ledger.runtime.claims.START_MARGIN` of its length) — a process
    stopped between that check and the handler's first line is beyond any runtime's reach;
    the fence still refuses whatever the late handler writes (judged apart)."""
    where = f"job {start.job_id}: handler started at {start.wall.isoformat()} by {start.worker_id}"
    if attempt is None:
        return f"{where} for run {start.run} attempt {start.attempt}, never leased"
    if attempt.worker_id != start.worker_id:
        return f"{where}, but that attempt was leased to {attempt.worker_id}"
    last_check = attempt.expires_at - lease * START_MARGIN
    if any(stop <= start.wall and resume >= last_check for stop, resume in stopped):
        return None
    if attempt.ended_at is not None and attempt.ended_at <= start.wall:
        return f"{where}, after its attempt ended ({attempt.ended_by} at {attempt.ended_at})"
    expiry = attempt.expiry_known_at(start.wall)
    if expiry is None or start.wall > expiry:
        return f"{where}, after its lease expired at {expiry}"
    return None


def extra_run_reasons(
    starts: list[HandlerStart], attempts: dict[tuple[UUID, int, int], Attempt]
) -> Counter[str]:
    """Handler runs beyond the one that succeeded, by how their attempt ended."""
    reasons: Counter[str] = Counter()
    for start in starts:
        attempt = attempts.get((start.job_id, start.run, start.attempt))
        if attempt is None:
            reasons["never leased"] += 1
        elif attempt.ended_by != "succeeded":
            reasons[attempt.ended_by or "still leased"] += 1
    return reasons


FLUSH_GRACE = timedelta(seconds=0.5)
"""How soon after its handler finished an outcome is expected to have been written, were
the database writable (the completer flushes within milliseconds; this is slack)."""


def dropped_outcome(
    finish: HandlerStart,
    attempt: Attempt | None,
    killed: Sequence[tuple[datetime, datetime]],
    stopped: Sequence[tuple[datetime, datetime]] = (),
    frozen: Sequence[tuple[datetime, datetime]] = (),
) -> str | None:
    """Why the outcome of a handler that finished while its lease was live never reached the
    ledger, or ``None``. Exempt: a worker killed after the finish (``killed``: each SIGKILL
    from just before it was sent to when the process was seen gone: a finish dated between
    the two was written by a process about to die), or stopped (``stopped``:
    its SIGSTOP-to-SIGCONT windows) after the finish, before the attempt ended (the outcome
    died with it or waited frozen); and a database nobody could write to from just after the
    finish until the lease expired (``frozen``: windows during which a stopped process held
    SQLite's single write lock, or the server was down and not yet found again).

    A stop is recorded just before its signal is sent, so a finish written between the two
    carries a later time than the stop; but a stopped process writes nothing, so a finish
    dated inside a stop window (before its SIGCONT is recorded) came before the stop landed."""
    if attempt is None or attempt.ended_by is None:
        return None
    expiry = attempt.expiry_known_at(finish.wall)
    if (
        expiry is None
        or finish.wall >= expiry
        or not attempt.ended_by.startswith("failed:lease_expired")
    ):
        return None
    ended_at = attempt.ended_at
    if any(finish.wall <= gone and (ended_at is None or sent <= ended_at)
           for sent, gone in killed):  # fmt: skip
        return None
    if any(finish.wall <= resume and (ended_at is None or stop <= ended_at)
           for stop, resume in stopped):  # fmt: skip
        return None
    if any(start <= finish.wall + FLUSH_GRACE and end >= expiry for start, end in frozen):
        return None
    return (
        f"job {finish.job_id}: handler of run {finish.run} attempt {finish.attempt} finished at "
        f"{finish.wall.isoformat()} on {finish.worker_id}, lease live until {expiry.isoformat()}, "
        f"yet the attempt ended {attempt.ended_by} at {attempt.ended_at}"
    )
