"""Helpers for the job-view tests: run the CLI in-process, and build a ledger with a mix."""

from __future__ import annotations

from uuid import UUID

from click.testing import CliRunner, Result

from jobledger_cli.main import cli
from ledger import Failure, FailureKind, FakeClock, Ledger

TERMINAL = Failure(kind=FailureKind.TERMINAL, code="input.bad", message="no total")
RETRYABLE = Failure(kind=FailureKind.RETRYABLE, code="smtp.busy", message="421 busy")


def invoke(url: str, *args: str) -> Result:
    """``jobledger --db url args…`` in-process; stdout and stderr kept apart."""
    return CliRunner().invoke(cli, ["--db", url, *args])


def enqueue(ledger: Ledger, job_type: str = "t", **options: object) -> UUID:
    job_id = ledger.enqueue(job_type, **options).job_id  # type: ignore[arg-type]
    assert job_id is not None
    return job_id


def define_types(ledger: Ledger) -> None:
    ledger.define("t", max_attempts=3)
    ledger.define("u", max_attempts=3)


def work_a_mix(ledger: Ledger, clock: FakeClock, tag: str) -> dict[str, UUID]:
    """Jobs of two types and orgs in every status: pending, leased, retried, succeeded,
    dead, cancelled. One clock second between commands."""
    jobs = {
        name: enqueue(ledger, job_type, org=org, payload={"tag": tag, "name": name})
        for name, job_type, org in [
            ("succeeded", "t", "acme"),
            ("retried", "t", "acme"),
            ("dead", "u", "umbrella"),
            ("leased", "u", None),
            ("cancelled", "t", None),
            ("pending", "t", "acme"),
        ]
    }
    clock.advance(1)
    leased = {state.job_id: state for state in ledger.claim("w1", limit=10)}
    assert set(leased) == set(jobs.values())
    clock.advance(1)
    for job_id, state in leased.items():
        assert state.lease is not None
        if job_id == jobs["succeeded"]:
            ledger.succeed(state.lease, output={"ok": True})
        elif job_id == jobs["retried"]:
            ledger.fail(state.lease, RETRYABLE)
        elif job_id == jobs["dead"]:
            ledger.fail(state.lease, TERMINAL)
        elif job_id == jobs["leased"]:
            ledger.heartbeat(state.lease)
        elif job_id == jobs["cancelled"]:
            ledger.cancel(job_id)
        else:
            ledger.release(state.lease)  # "pending": handed back
        clock.advance(1)
    return jobs
