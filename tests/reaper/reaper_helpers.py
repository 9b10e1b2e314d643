"""Helpers for the reaper tests."""

from __future__ import annotations

import sqlite3
from uuid import UUID

import psycopg

from ledger import Ledger
from ledger.store.config import is_postgres


def plant_conflicting_dead_letter(ledger: Ledger, job_id: UUID) -> None:
    """Insert a dead-letter row for ``job_id`` behind the ledger's back, so that
    dead-lettering the job fails on the row's primary key (a hand-made conflict)."""
    url = ledger.store.conninfo if is_postgres(getattr(ledger.store, "conninfo", "")) else None
    row = (
        "INSERT INTO jl_dead_letters (job_id, job_type, run_number, attempt, code, dead_at, "
        "snapshot) VALUES ({}, 't', 1, 1, 'x', 0, {})"
    )
    if url is not None:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(row.format("%s", "%s"), (job_id, b"x"))  # type: ignore[arg-type]
    else:
        path = ledger.store.path  # type: ignore[attr-defined]
        with sqlite3.connect(path) as conn:
            conn.execute(row.format("?", "?"), (job_id.hex, b"x"))
