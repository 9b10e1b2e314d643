"""The migration lock: one schema change (``init``, ``migrate``, a projection rebuild) at a time
per PostgreSQL database, across processes and hosts.

Two ``jobledger migrate`` runs side by side used to race: both created the same composite
type (``duplicate key … pg_type_typname_nsp_index``), both rebuilt into the same shadow
table (``relation "jl_queue__rebuild" does not exist``), and each loser's error looked like
a data conflict. Now each takes a session-level advisory lock on :data:`MIGRATION_LOCK_KEY`
first, on a session of its own that it keeps for the whole change and that also runs the
change's DDL (:class:`MigrationSession`; a rebuild's shadow loads run on pooled connections
meanwhile). A second one waits for the first, up to ``wait_s``, saying so on the log, and then
finds nothing left to do; past ``wait_s`` it fails with :class:`MigrationBusyError` naming the
session that holds the lock. The lock goes with its session: a process that dies mid-change
frees it (the change itself is safe to run again, see :mod:`ledger.api.migrate`).

Advisory locks are per database, so ledgers in different databases never wait for each
other. Behind a pooler in transaction mode (PgBouncer's ``pool_mode = transaction``) a
session lock does not hold: run ``init``/``migrate`` against the server itself.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping
from contextlib import contextmanager

import psycopg
from psycopg.rows import DictRow
from psycopg.sql import SQL, Literal

from ledger.core.errors import MigrationBusyError

MIGRATION_LOCK_KEY = int.from_bytes(b"jobledgr", "big")
"""7669456908132312946 (``0x6a6f626c65646772``, "jobledgr" in ASCII): the advisory lock key
every schema change of a jobledger database holds. To see who holds it::

    SELECT pid, application_name FROM pg_locks JOIN pg_stat_activity USING (pid)
    WHERE locktype = 'advisory' AND classid = 1785684588 AND objid = 1701078898;
"""

log = logging.getLogger("jobledger.migrate")

Connection = psycopg.Connection[DictRow]


def _holder(conn: Connection, sql: Mapping[str, str]) -> str:
    """Who holds the lock, for a message: ``pid 123, jobledger 123@host``."""
    row = conn.execute(sql["migration_lock_holder"], {"key": MIGRATION_LOCK_KEY}).fetchone()
    if row is None:
        return "a session that has just finished"
    name = f", {row['application_name']}" if row["application_name"] else ""
    client = f" from {row['client_addr']}" if row["client_addr"] else ""
    return f"session pid {row['pid']}{name}{client}"


@contextmanager
def migration_lock(
    conn: Connection, sql: Mapping[str, str], where: str, wait_s: float
) -> Iterator[None]:
    """Hold the migration lock on ``conn`` (an autocommit session) for the block; wait for it
    up to ``wait_s`` if another session holds it (0: do not wait)."""
    key = {"key": MIGRATION_LOCK_KEY}
    row = conn.execute(sql["migration_lock_try"], key).fetchone()
    if row is None or not row["got"]:
        holder = _holder(conn, sql)
        if wait_s <= 0:
            raise MigrationBusyError(
                f"another jobledger init or migrate is running on {where} ({holder}); "
                "run this one again once it has finished"
            )
        log.warning(
            "another jobledger init or migrate is running on %s (%s); waiting up to %g s for it",
            where,
            holder,
            wait_s,
        )
        millis = max(1, round(wait_s * 1000))
        conn.execute(SQL("SET lock_timeout = {}").format(Literal(f"{millis}ms")))
        try:
            conn.execute(sql["migration_lock_wait"], key)
        except psycopg.errors.LockNotAvailable as exc:
            raise MigrationBusyError(
                f"another jobledger init or migrate has been running on {where} for over "
                f"{wait_s:g} s ({_holder(conn, sql)}); run this one again once it has finished"
            ) from exc
        finally:
            conn.execute("RESET lock_timeout")
    try:
        yield
    finally:
        if not conn.closed and not conn.broken:
            conn.execute(sql["migration_lock_release"], key)
