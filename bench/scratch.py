"""Scratch databases for the benchmarks: made fresh, dropped afterwards whatever happens."""

from __future__ import annotations

import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg


@contextmanager
def scratch_database(backend: str, server: str) -> Iterator[str]:
    """The URL (PostgreSQL ``jl_bench_<random>`` on ``server``) or path (SQLite, in a
    temporary directory) of a new empty database, removed when the block ends."""
    if backend == "sqlite":
        with tempfile.TemporaryDirectory() as tmp:
            yield str(Path(tmp) / "bench.db")
        return
    name = f"jl_bench_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(f"{server}/postgres", autocommit=True, connect_timeout=5) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield f"{server}/{name}"
    finally:
        # FORCE: a thread that died mid-run may still hold a pooled connection.
        with psycopg.connect(f"{server}/postgres", autocommit=True, connect_timeout=5) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
