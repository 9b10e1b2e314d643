"""The PostgreSQL side of ``compare.py``: scratch databases, durability checks, WAL accounting.

- Every measurement gets a database of its own, dropped afterwards whatever happens.
- Durability is checked, not assumed: before the run, no per-database or per-role override of
  ``synchronous_commit`` may apply (``pg_db_role_setting``), and after each measurement none
  may have appeared and the system may have left no UNLOGGED table that holds jobs. Either
  fails the run loudly (:class:`DurabilityError`).
- WAL: while a measurement runs, a temporary physical replication slot keeps the server from
  recycling its WAL; afterwards ``pg_walinspect`` reads the records between the phase
  boundaries the adapter noted and keeps those written for the measurement's database (a
  block of one of its relations, or a record of a transaction that wrote one, such as its
  commit). The server may be shared (other tests, other databases), so the raw LSN difference
  overstates; both are kept, and the attributed figure is the one reported.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import psycopg

WINDOWS = (("enqueue_start", "enqueue_end"), ("process_start", "process_end"))
DURABILITY_SETTINGS = ("synchronous_commit",)

OVERRIDES_SQL = """
SELECT coalesce(d.datname, '(every database)'), coalesce(r.rolname, '(every role)'), s.setting
FROM pg_db_role_setting o
CROSS JOIN LATERAL unnest(o.setconfig) AS s(setting)
LEFT JOIN pg_database d ON d.oid = o.setdatabase
LEFT JOIN pg_roles r ON r.oid = o.setrole
WHERE split_part(s.setting, '=', 1) = ANY(%(names)s)
  AND (o.setdatabase = 0 OR d.datname = current_database() OR d.datname = %(database)s)
  AND (o.setrole = 0 OR r.rolname = current_user)
"""
UNLOGGED_SQL = """
SELECT n.nspname || '.' || c.relname
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE c.relpersistence = 'u' AND c.relkind IN ('r', 'p')
ORDER BY 1
"""
# Bytes of the records in [start, end) written for database %(db)s, and of all records.
WAL_SQL = """
WITH records AS (
    SELECT xid::text AS xid,
           pg_wal_lsn_diff(end_lsn, start_lsn) AS bytes,
           coalesce(block_ref, '') LIKE %(pattern)s AS ours
    FROM pg_get_wal_records_info(%(start)s::pg_lsn, %(end)s::pg_lsn)
), our_xids AS (
    SELECT DISTINCT xid FROM records WHERE ours AND xid <> '0'
)
SELECT coalesce(sum(bytes) FILTER (WHERE ours OR xid IN (SELECT xid FROM our_xids)), 0),
       coalesce(sum(bytes), 0)
FROM records
"""
# Tables peers keep UNLOGGED on purpose that hold no jobs (system -> tables).
UNLOGGED_NOT_JOBS: dict[str, frozenset[str]] = {
    # Leadership and producer heartbeats (oban/queries/install.sql).
    "oban-py": frozenset({"public.oban_leaders", "public.oban_producers"}),
}


class DurabilityError(RuntimeError):
    """The server or the system does not write jobs durably: its figures would not compare."""


def database_url(server: str, name: str) -> str:
    # URL form (not key=value): awa's Rust driver accepts only URLs.
    return urlsplit(server)._replace(path=f"/{name}").geturl()


def lsn_bytes(lsn: str) -> int:
    high, low = lsn.split("/")
    return (int(high, 16) << 32) | int(low, 16)


@contextmanager
def fresh_database(server: str, label: str) -> Iterator[str]:
    """A database of its own for one measurement, dropped afterwards whatever happens."""
    name = f"jl_cmp_{label.replace('-', '_')}_{secrets.token_hex(4)}"
    admin = database_url(server, "postgres")
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield database_url(server, name)
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@contextmanager
def wal_kept(server: str) -> Iterator[bool]:
    """Keep the server's WAL from here until the block ends (a temporary physical slot, gone
    with this session even if the run dies); False if no slot could be made."""
    with psycopg.connect(database_url(server, "postgres"), autocommit=True) as conn:
        try:
            conn.execute(
                "SELECT pg_create_physical_replication_slot(%s, true, true)",
                (f"jl_cmp_{secrets.token_hex(6)}",),
            )
        except psycopg.Error:
            yield False
            return
        yield True


def server_facts(server: str) -> dict[str, str]:
    try:
        conn = psycopg.connect(database_url(server, "postgres"), autocommit=True)
    except psycopg.OperationalError as exc:
        raise SystemExit(f"cannot reach PostgreSQL at {server}: {exc}") from exc
    with conn:
        settings = ("server_version", "synchronous_commit", "fsync", "full_page_writes")
        return {
            setting: str(conn.execute(f"SHOW {setting}").fetchone()[0])  # type: ignore[index]
            for setting in (*settings, "max_connections", "wal_level")
        }


def overrides(url: str, database: str = "") -> list[str]:
    """``synchronous_commit`` overrides that apply to this session's role in ``database``
    (or the connected one): per database, per role, or both."""
    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute(
            OVERRIDES_SQL, {"names": list(DURABILITY_SETTINGS), "database": database}
        ).fetchall()
    return [f"{db} / {role}: {setting}" for db, role, setting in rows]


def check_server(server: str) -> None:
    found = overrides(database_url(server, "postgres"))
    if found:
        raise DurabilityError("synchronous_commit is overridden: " + "; ".join(found))


def check_database(url: str, system: str) -> list[str]:
    """Fail loudly on a durability override or an UNLOGGED job table; the UNLOGGED tables
    that hold no jobs (allowed) are returned for the report."""
    found = overrides(url)
    if found:
        raise DurabilityError("synchronous_commit is overridden: " + "; ".join(found))
    with psycopg.connect(url, autocommit=True) as conn:
        unlogged = [row[0] for row in conn.execute(UNLOGGED_SQL).fetchall()]
    allowed = UNLOGGED_NOT_JOBS.get(system, frozenset())
    jobs = [table for table in unlogged if table not in allowed]
    if jobs:
        raise DurabilityError(f"{system} keeps UNLOGGED tables: {', '.join(jobs)}")
    return unlogged


@dataclass(frozen=True)
class Wal:
    """WAL bytes of one measurement's timed phases: ``ours`` for its database, ``raw`` the
    server's whole LSN difference; ``None`` per phase where the records were not readable."""

    ours: dict[str, int | None]
    raw: dict[str, int]

    def as_json(self) -> dict[str, Any]:
        ours = [v for v in self.ours.values() if v is not None]
        attributed = len(ours) == len(self.ours)
        return {
            "wal_bytes": sum(ours) if attributed else sum(self.raw.values()),
            "wal_attributed": attributed,
            "wal_bytes_raw": sum(self.raw.values()),
            "wal_phases": {"ours": self.ours, "raw": self.raw},
        }


def wal(url: str, lsn: dict[str, str], windows: Sequence[tuple[str, str]] = WINDOWS) -> Wal:
    """The WAL of the timed phases (``lsn``: the adapter's phase boundaries)."""
    ours: dict[str, int | None] = {}
    raw: dict[str, int] = {}
    with psycopg.connect(url, autocommit=True) as conn:
        oid = conn.execute("SELECT oid FROM pg_database WHERE datname = current_database()")
        pattern = f"%/{oid.fetchone()[0]}/%"  # type: ignore[index]
        try:
            conn.execute("CREATE EXTENSION IF NOT EXISTS pg_walinspect")
            inspect = True
        except psycopg.Error:
            inspect = False
        for start, end in windows:
            phase = start.removesuffix("_start")
            raw[phase] = lsn_bytes(lsn[end]) - lsn_bytes(lsn[start])
            ours[phase] = None
            if not inspect or raw[phase] <= 0:
                ours[phase] = 0 if raw[phase] <= 0 else None
                continue
            try:
                row = conn.execute(
                    WAL_SQL, {"pattern": pattern, "start": lsn[start], "end": lsn[end]}
                ).fetchone()
            except psycopg.Error:
                continue  # recycled after all: the raw figure stands in
            ours[phase] = int(row[0]) if row else None
    return Wal(ours, raw)
