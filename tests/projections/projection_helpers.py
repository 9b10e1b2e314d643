"""Helpers for the projection tests: raw SQL on either backend, and a ledger with every view."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from typing import Any
from uuid import UUID

import psycopg

from ledger import Failure, FailureKind, FakeClock, Ledger
from ledger.core.values import Subject, SubjectOp
from ledger.views.rows_from_history import TailPosition


def raw(url: str, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Run one statement outside the ledger (``?`` placeholders) and commit it."""
    if url.startswith("postgresql"):
        with psycopg.connect(url, autocommit=True) as conn:
            cursor = conn.execute(sql.replace("?", "%s").encode(), params)
            return cursor.fetchall() if cursor.description else []
    with closing(sqlite3.connect(url.removeprefix("sqlite:///"))) as conn:
        rows = conn.execute(sql, params).fetchall()
        conn.commit()
        return rows


def as_uuid(value: Any) -> UUID:
    return value if isinstance(value, UUID) else UUID(str(value))


def populate(url: str, clock: FakeClock | None = None) -> None:
    """Fill every inline view: jobs in each status, two job types, sync-state rows (one
    revision kept by a later result without one), dead letters (one pruned by a delete)."""
    with Ledger.open(url, clock=clock or FakeClock()) as ledger:
        ledger.define("t")
        ledger.define("sync", max_attempts=1)
        ledger.set_enabled("t", False)
        ledger.set_enabled("t", True)
        for i in range(6):
            ledger.enqueue("t", {"i": i}, idempotency_key=f"k{i}" if i % 2 else None)
        for uri in ("a", "b", "c"):
            ledger.enqueue("sync", subject=Subject(source_id="src", uri=uri))
        jobs = ledger.claim("w", limit=20, lease_s=30)
        by_uri = {job.subject.uri: job for job in jobs if job.subject is not None}
        plain = [job for job in jobs if job.subject is None]
        ledger.succeed(_lease(by_uri["a"]), revision="r1", content_hash="h1")
        ledger.succeed(_lease(by_uri["b"]), revision="r2")
        terminal = Failure(kind=FailureKind.TERMINAL, code="bad", message="m")
        ledger.fail(_lease(by_uri["c"]), terminal)
        ledger.succeed(_lease(plain[0]))
        ledger.fail(_lease(plain[1]), terminal)
        # A later result without a revision keeps the stored one (upsert never erases).
        ledger.enqueue("sync", subject=Subject(source_id="src", uri="a"))
        [again] = ledger.claim("w", types=["sync"], limit=1)
        ledger.succeed(_lease(again), content_hash="h2")
        # A dead document deleted successfully: its row and its dead letter go.
        ledger.enqueue("sync", subject=Subject(source_id="src", uri="c", op=SubjectOp.DELETE))
        [delete] = ledger.claim("w", types=["sync"], limit=1)
        ledger.succeed(_lease(delete))
        ledger.enqueue("sync", subject=Subject(source_id="src", uri="d"))
        [dies] = ledger.claim("w", types=["sync"], limit=1)
        ledger.fail(_lease(dies), terminal)


def _lease(job: Any) -> Any:
    assert job.lease is not None
    return job.lease


def reset_tracking(url: str, name: str = "audit") -> None:
    """Set a tracked projection's recorded position back to the start (both halves of it)."""
    with Ledger.open(url) as ledger, ledger.store.view_tables() as tables:
        tables.set_tracking(name, TailPosition())
