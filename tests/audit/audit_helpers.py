"""A small history for the audit tests: eight simulated days of jobs across two types, two
orgs (and none), two workers, retried and dead-lettered failures with codes."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

from ledger import AuditQuery, AuditRow, BackoffPolicy, Failure, FailureKind, FakeClock, Ledger
from ledger.clock import SystemClock

DAYS = 8


@dataclass
class Scenario:
    url: str
    clock: FakeClock
    start: datetime
    vanished_job: UUID
    """Leased by ``w2`` on the last day and never finished."""


def _failure(kind: FailureKind, code: str) -> Failure:
    return Failure(kind=kind, code=code, message=f"{code} happened")


def build(url: str) -> Scenario:
    """The history, stamped from ten days before the real now (the CLI's ``7d`` is relative
    to the system clock), one round per simulated day."""
    start = SystemClock().now().replace(microsecond=0) - timedelta(days=10)
    clock = FakeClock(start)
    with Ledger.open(url, clock=clock) as ledger:
        ledger.define("mail", max_attempts=2, backoff=BackoffPolicy(base_s=10, max_s=10, jitter=0))
        ledger.define("report", max_attempts=1)
        for day in range(DAYS):
            ledger.enqueue("mail", {"kind": "ok"}, org="acme")
            ledger.enqueue("mail", {"kind": "retry", "code": "E1" if day % 2 else "E2"}, org="beta")
            ledger.enqueue("report", {"kind": "dead", "code": "E3"})
            if day % 3 == 0:
                ledger.enqueue("report", {"kind": "retry", "code": "E1"}, org="beta")
            worker = "w1" if day % 2 == 0 else "w2"
            for job in ledger.claim(worker, limit=20):
                assert job.lease is not None
                kind = job.request.payload["kind"]
                code = str(job.request.payload.get("code", ""))
                if kind == "ok" or job.attempt > 1:
                    ledger.succeed(job.lease)
                elif kind == "retry":
                    ledger.fail(job.lease, _failure(FailureKind.RETRYABLE, code))
                else:
                    ledger.fail(job.lease, _failure(FailureKind.TERMINAL, code))
            clock.advance(days=1)
        ledger.enqueue("mail", {"kind": "ok"}, org="acme")
        vanished = ledger.enqueue("report", {"kind": "ok"}, org="acme").job_id
        assert vanished is not None
        [leased] = ledger.claim("w2", types=["report"])
        assert leased.job_id == vanished
    return Scenario(url, clock, start, vanished)


def read_all(ledger: Ledger, query: AuditQuery) -> list[AuditRow]:
    """Every row of ``query``, one page of up to 10,000."""
    page = ledger.audit(AuditQuery(**{**fields(query), "limit": 10_000, "cursor": None}))
    assert page.next_cursor is None
    return page.rows


def page_through(ledger: Ledger, query: AuditQuery) -> list[AuditRow]:
    """Every row of ``query``, following the cursors page by page."""
    rows: list[AuditRow] = []
    page = ledger.audit(query)
    rows += page.rows
    while page.next_cursor is not None:
        page = ledger.audit(AuditQuery(**{**fields(query), "cursor": page.next_cursor}))
        rows += page.rows
    return rows


def fields(query: AuditQuery) -> dict[str, Any]:
    return {name: getattr(query, name) for name in query.__struct_fields__}


def matches(row: AuditRow, query: AuditQuery, statuses: dict[UUID, str]) -> bool:
    """Whether ``row`` answers ``query``, judged on the row's own fields (the oracle)."""
    checks = [
        query.job is None or row.job_id == query.job,
        query.job_type is None or row.job_type == query.job_type,
        not query.events or row.event in query.events,
        query.worker is None or row.worker_id == query.worker,
        query.org is None or row.org == query.org,
        query.status is None or statuses[row.job_id] == query.status,
        query.code is None or row.code == query.code,
        query.since is None or row.at >= query.since,
        query.until is None or row.at < query.until,
    ]
    return all(checks)
