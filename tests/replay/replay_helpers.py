"""Helpers for the replay tests: histories made by real commands, histories altered through
the store, and the CLI run in-process."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from uuid import UUID

from click.testing import CliRunner, Result
from eventsourcing.persistence import StoredEvent

from jobledger_cli.main import cli
from ledger import BackoffPolicy, Failure, FailureKind, FakeClock, JobState, Ledger, Record
from ledger.core.events import JobEvent
from ledger.core.state import Lease, fold
from ledger.core.values import Subject
from ledger.maintenance.reaper import Reaper
from ledger.views.kinds import JOBS

RETRYABLE = Failure(kind=FailureKind.RETRYABLE, code="http.503", message="busy")
TERMINAL = Failure(kind=FailureKind.TERMINAL, code="bad.input", message="no")


def invoke(url: str, *args: str) -> Result:
    """``jobledger --db url args…`` in-process; stdout and stderr kept apart."""
    return CliRunner().invoke(cli, ["--db", url, *args])


def lease_of(state: JobState) -> Lease:
    lease = state.lease
    assert lease is not None
    return lease


def claim_one(ledger: Ledger, job_id: UUID, worker: str = "w1", lease_s: float = 30.0) -> JobState:
    """Claim the next due ``r`` job, which must be ``job_id``."""
    [job] = ledger.claim(worker, types=["r"], lease_s=lease_s)
    assert job.job_id == job_id
    return job


def make_histories(ledger: Ledger, clock: FakeClock, url: str) -> dict[str, UUID]:
    """Jobs whose histories cover every command: jittered retries, dead letters, requeues,
    reaps (with and without the reaper's diagnostic), releases, cancels, progress with a
    checkpoint, a handler's ``not_before``, auto-define, a sync subject and a definition
    changed after a job was enqueued under it."""
    ledger.define("r", max_attempts=3, backoff=BackoffPolicy(base_s=5.0, max_s=60.0, jitter=0.5))
    jobs: dict[str, UUID] = {}

    def enqueue(name: str, job_type: str = "r", **options: object) -> UUID:
        job_id = ledger.enqueue(job_type, {"name": name}, **options).job_id  # type: ignore[arg-type]
        assert job_id is not None
        jobs[name] = job_id
        return job_id

    # A job that retries with jitter until it is dead, is requeued and then succeeds.
    enqueue("flaky")
    ledger.define("r", max_attempts=4, backoff=BackoffPolicy(base_s=5.0, max_s=60.0, jitter=0.5))
    for _ in range(3):
        clock.advance(120)
        job = claim_one(ledger, jobs["flaky"])
        clock.advance(1)
        ledger.heartbeat(lease_of(job), lease_s=30)
        ledger.progress(lease_of(job), stage="running", done=1, total=3, checkpoint={"page": 1})
        clock.advance(1)
        ledger.fail(lease_of(job), RETRYABLE)
    assert ledger.get(jobs["flaky"]).status == "dead"  # type: ignore[union-attr]
    ledger.requeue(jobs["flaky"])
    job = claim_one(ledger, jobs["flaky"])
    ledger.progress(lease_of(job), done=3)
    ledger.succeed(lease_of(job), output={"pages": 3})

    # Reaped twice (once after running started with no renewal, once after a renewal),
    # then dead: max_attempts 2.
    enqueue("lost", max_attempts=2)
    clock.advance(1)
    job = claim_one(ledger, jobs["lost"], "w2", lease_s=10)
    ledger.progress(lease_of(job), stage="running")
    clock.advance(11)
    Reaper(ledger).run_once()
    clock.advance(61)
    job = claim_one(ledger, jobs["lost"], "w2", lease_s=10)
    ledger.progress(lease_of(job), stage="running")
    clock.advance(2)
    ledger.heartbeat(lease_of(job), lease_s=10)
    clock.advance(11)
    ledger.reap_expired(retry_delay_s=5)
    assert ledger.get(jobs["lost"]).status == "dead"  # type: ignore[union-attr]

    # Released, then a terminal failure; a pending job cancelled and requeued; a handler's
    # not_before beyond the backoff; a cancel of a leased job.
    enqueue("released")
    clock.advance(1)
    job = claim_one(ledger, jobs["released"])
    ledger.release(lease_of(job))
    job = claim_one(ledger, jobs["released"])
    ledger.fail(lease_of(job), TERMINAL)
    enqueue("cancelled", delay_s=30, idempotency_key="k1", priority=5)
    ledger.cancel(jobs["cancelled"])
    ledger.requeue(jobs["cancelled"])
    job = claim_one(ledger, jobs["cancelled"])
    later = clock.now().replace(year=clock.now().year + 1)
    ledger.fail(lease_of(job), RETRYABLE, not_before=later)
    enqueue("leased-cancel")
    claim_one(ledger, jobs["leased-cancel"])
    ledger.cancel(jobs["leased-cancel"], reason="operator said so")

    # Auto-defined type; a sync subject's success with a revision.
    with Ledger.open(url, clock=clock, auto_define=True) as auto:
        job_id = auto.enqueue("auto.t", {"x": 1}).job_id
        assert job_id is not None
        jobs["auto"] = job_id
    enqueue("sync", subject=Subject(source_id="s", uri="u1"))
    job = claim_one(ledger, jobs["sync"])
    ledger.succeed(lease_of(job), output=None, revision="r1", content_hash="h1")
    return jobs


def events_of(records: Sequence[Record]) -> list[JobEvent]:
    events = []
    for record in records:
        assert isinstance(record.event, JobEvent)
        events.append(record.event)
    return events


def prefix_state(records: Sequence[Record], k: int) -> JobState | None:
    return fold(events_of(records[:k]))


def append_events(ledger: Ledger, job_id: UUID, events: Sequence[JobEvent]) -> list[int]:
    """Append ``events`` to a job's stream through the store's unit of work, as any writer
    would (folded, views written): the events must be legal transitions. Returns their
    versions."""
    with ledger.store.unit_of_work() as uow:
        state = uow.lock_jobs([job_id])[job_id]
        uow.append([JOBS.change(job_id, events)])
    return list(range(state.version + 1, state.version + 1 + len(events)))


def insert_raw_events(ledger: Ledger, job_id: UUID, events: Sequence[JobEvent]) -> list[int]:
    """Insert events into a job's stream through the store's recorder without folding them
    (the only way an illegal transition gets in: a corrupt import). Returns their versions."""
    with ledger.store.unit_of_work() as uow:
        state = uow.lock_jobs([job_id])[job_id]
        versions = list(range(state.version + 1, state.version + 1 + len(events)))
        stored = [
            StoredEvent(job_id, version, *ledger.store.codec.encode(event))
            for version, event in zip(versions, events, strict=True)
        ]
        uow._insert_stored_events(stored, positions_needed=False)
    return versions


def iso(moment: datetime) -> str:
    return moment.isoformat()
