"""Helpers for the exchange tests: a ledger with every kind of history, and CLI runs."""

from __future__ import annotations

from datetime import datetime
from typing import NamedTuple
from uuid import UUID

from click.testing import CliRunner, Result

from jobledger_cli.main import cli
from ledger import (
    BackoffPolicy,
    Failure,
    FailureKind,
    FakeClock,
    Lease,
    Ledger,
    Subject,
)

TERMINAL = Failure(kind=FailureKind.TERMINAL, code="doc.missing", message="gone")
BUSY = Failure(kind=FailureKind.RETRYABLE, code="smtp.busy", message="421 try later")


class Jobs(NamedTuple):
    """The jobs :func:`build` made, by what happened to them (in enqueue order)."""

    succeeded: UUID
    dead: UUID
    retrying: UUID
    cancelled: UUID
    requeued: UUID
    leased: UUID
    synced: UUID
    pending: UUID

    @property
    def all(self) -> list[UUID]:
        return list(self)


def _claim(ledger: Ledger, job_type: str, job_id: UUID) -> Lease:
    [job] = ledger.claim("w-1", types=[job_type], lease_s=60)
    assert job.job_id == job_id and job.lease is not None
    return job.lease


def build(url: str, clock: FakeClock) -> Jobs:
    """Two job types (one with an update), eight jobs: succeeded (with output), dead,
    retrying, cancelled, requeued after death, mid-lease (heartbeat, stage, checkpoint), a
    sync-subject success and a plain pending one; two orgs; time moves between steps."""
    with Ledger.open(url, clock=clock) as ledger:
        ledger.define("t", backoff=BackoffPolicy(base_s=10.0, max_s=100.0, jitter=0.0))
        ledger.define("ingest", max_attempts=1)
        clock.advance(1)
        ledger.define("t", max_attempts=4, backoff=BackoffPolicy(base_s=10.0, jitter=0.0))

        def enqueue(
            job_type: str,
            org: str | None = None,
            *,
            priority: int | None = None,
            run_at: datetime | None = None,
            idempotency_key: str | None = None,
            subject: Subject | None = None,
        ) -> UUID:
            clock.advance(0.000001)
            job_id = ledger.enqueue(
                job_type,
                {"n": 1, "s": "é"},
                org=org,
                priority=priority,
                run_at=run_at,
                idempotency_key=idempotency_key,
                subject=subject,
            ).job_id
            assert job_id is not None
            return job_id

        succeeded = enqueue("t", "acme")
        lease = _claim(ledger, "t", succeeded)
        clock.advance(2)
        ledger.succeed(lease, output={"ok": True, "items": [1, 2.5, None]})

        dead = enqueue("ingest", "acme")
        lease = _claim(ledger, "ingest", dead)
        ledger.fail(lease, TERMINAL)

        clock.advance(60)
        retrying = enqueue("t", "globex")
        lease = _claim(ledger, "t", retrying)
        ledger.fail(lease, BUSY)

        cancelled = enqueue("t", "globex", idempotency_key="k-1")
        ledger.cancel(cancelled)

        requeued = enqueue("ingest")
        lease = _claim(ledger, "ingest", requeued)
        ledger.fail(lease, TERMINAL)
        clock.advance(5)
        ledger.requeue(requeued)

        clock.advance(3600)
        leased = enqueue("t", "acme", priority=500)
        lease = _claim(ledger, "t", leased)
        clock.advance(10)
        ledger.heartbeat(lease, lease_s=60)
        ledger.progress(lease, stage="running", done=3, total=10, checkpoint={"page": 3})

        synced = enqueue(
            "ingest", priority=500, subject=Subject(source_id="src", uri="file:///a.md")
        )
        lease = _claim(ledger, "ingest", synced)
        ledger.succeed(lease, revision="r1", content_hash="md5-a")

        pending = enqueue("t", "acme", run_at=clock.now().replace(year=2027))
    return Jobs(succeeded, dead, retrying, cancelled, requeued, leased, synced, pending)


def invoke(url: str | None, *args: str, stdin: bytes | None = None) -> Result:
    """Run ``jobledger [--db url] args…`` in-process; stdout and stderr kept apart."""
    argv = [*(["--db", url] if url is not None else []), *args]
    return CliRunner().invoke(cli, argv, input=stdin)


def export_bytes(url: str, *args: str) -> bytes:
    result = invoke(url, "export", *args)
    assert result.exit_code == 0, result.stderr
    return result.stdout_bytes


def head(url: str) -> int:
    with Ledger.open(url) as ledger:
        return ledger.store.head_position()
