"""Test databases copied from the session's template and, once a test is done with one, reset
to the template's exact state and handed to a later test instead of being dropped.

Why: on PostgreSQL 15 every ``DROP DATABASE`` requests an immediate checkpoint of the whole
cluster (``checkpoints_req`` goes up by one per drop), and every ``CREATE DATABASE …
TEMPLATE`` (the default WAL_LOG strategy) writes the whole copy, system catalogs included
(~7.5 MB), to the WAL and then to disk. Per test that is a copy, a checkpoint and ~15 MB of
I/O, for tests that mostly write a few rows; a reset is a ``TRUNCATE`` of the tables the test
wrote and the template's handful of rows written back.

A database is handed out again only if, after the reset, its :func:`state` is identical to a
fresh copy's: every schema object outside the system schemas with its definition, ACLs and
options, the database's settings, sequences, planner statistics (``pg_statistic``; the
tables' ``relpages``/``reltuples``), the size on disk of every table, index and TOAST table,
and every row of every table. (Not compared: an index's own ``relpages``/``reltuples``, which
``CREATE INDEX`` sets to 1/0 and ``TRUNCATE`` to 0/-1; the planner reads an index's size from
its file, compared above.) Anything else (a test that dropped, added or altered a table, ran
ANALYZE, set a database option, left a prepared transaction, a session that would not end, an
error during the reset) and the database is dropped as before.

Each test gets a database no other test is using, under a name no test had before: the
sessions of the test before are ended (and waited for) before the reset, the database is then
renamed (a pool or listener left running that reconnects by the old name finds no database,
as after a drop), and a spare with any session on it is dropped, not handed out.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor

import psycopg
from psycopg import sql

Connect = Callable[[str], "psycopg.Connection[tuple[object, ...]]"]

SESSIONS_GONE_S = 5.0

_USER_RELATIONS = """
    SELECT c.oid FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
    WHERE n.nspname NOT IN ('pg_catalog', 'information_schema')
      AND n.nspname NOT LIKE 'pg_toast%' AND n.nspname NOT LIKE 'pg_temp%'
"""

_STATE_QUERY = f"""
SELECT line FROM (
    SELECT format('schema %s owner %s', nspname, nspowner::regrole) AS line
      FROM pg_namespace
     WHERE nspname NOT IN ('pg_catalog', 'information_schema')
       AND nspname NOT LIKE 'pg_toast%' AND nspname NOT LIKE 'pg_temp%'
    UNION ALL
    SELECT format('relation %s kind %s persistence %s options %s acl %s', c.oid::regclass,
                  c.relkind, c.relpersistence, c.reloptions, c.relacl)
      FROM pg_class c WHERE c.oid IN ({_USER_RELATIONS})
    UNION ALL
    SELECT format('size estimate of %s: pages %s tuples %s visible %s', c.oid::regclass,
                  c.relpages, c.reltuples, c.relallvisible)
      FROM pg_class c WHERE c.oid IN ({_USER_RELATIONS}) AND c.relkind <> 'i'
    UNION ALL
    SELECT format('%s bytes %s toast %s', c.oid::regclass, pg_relation_size(c.oid),
                  CASE WHEN c.reltoastrelid <> 0 THEN pg_relation_size(c.reltoastrelid) END)
      FROM pg_class c WHERE c.oid IN ({_USER_RELATIONS}) AND c.relkind IN ('r', 'i', 'p')
    UNION ALL
    SELECT format('column %s.%s %s %s notnull %s default %s dropped %s', a.attrelid::regclass,
                  a.attnum, a.attname, format_type(a.atttypid, a.atttypmod), a.attnotnull,
                  pg_get_expr(d.adbin, d.adrelid), a.attisdropped)
      FROM pg_attribute a
      LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
     WHERE a.attrelid IN ({_USER_RELATIONS}) AND a.attnum > 0
    UNION ALL
    SELECT format('constraint %s on %s: %s', conname, conrelid::regclass,
                  pg_get_constraintdef(oid))
      FROM pg_constraint WHERE connamespace IN (SELECT relnamespace FROM pg_class
                                                WHERE oid IN ({_USER_RELATIONS}))
         OR conrelid IN ({_USER_RELATIONS})
    UNION ALL
    SELECT format('index %s', pg_get_indexdef(indexrelid))
      FROM pg_index WHERE indrelid IN ({_USER_RELATIONS})
    UNION ALL
    SELECT format('trigger %s', pg_get_triggerdef(oid))
      FROM pg_trigger WHERE tgrelid IN ({_USER_RELATIONS})
    UNION ALL
    SELECT format('rule %s', definition) FROM pg_rules
     WHERE schemaname NOT IN ('pg_catalog', 'information_schema')
    UNION ALL
    SELECT format('policy %s on %s', polname, polrelid::regclass) FROM pg_policy
    UNION ALL
    SELECT format('view %s: %s', c.oid::regclass, pg_get_viewdef(c.oid))
      FROM pg_class c WHERE c.oid IN ({_USER_RELATIONS}) AND c.relkind IN ('v', 'm')
    UNION ALL
    SELECT format('function %s(%s): %s', p.oid::regproc, pg_get_function_identity_arguments(p.oid),
                  md5(p.prosrc))
      FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
     WHERE n.nspname NOT IN ('pg_catalog', 'information_schema')
    UNION ALL
    SELECT format('type %s', t.oid::regtype)
      FROM pg_type t JOIN pg_namespace n ON n.oid = t.typnamespace
     WHERE n.nspname NOT IN ('pg_catalog', 'information_schema')
       AND n.nspname NOT LIKE 'pg_toast%' AND t.typrelid = 0
    UNION ALL
    SELECT format('enum %s %s', enumtypid::regtype, enumlabel) FROM pg_enum
    UNION ALL
    SELECT format('extension %s %s', extname, extversion) FROM pg_extension
    UNION ALL
    SELECT format('event trigger %s', evtname) FROM pg_event_trigger
    UNION ALL
    SELECT format('publication %s', pubname) FROM pg_publication
    UNION ALL
    SELECT format('large objects %s', count(*)) FROM pg_largeobject_metadata
    UNION ALL
    SELECT format('statistics of %s', starelid::regclass) FROM pg_statistic
     WHERE starelid IN ({_USER_RELATIONS})
    UNION ALL
    SELECT format('extended statistics %s', stxname) FROM pg_statistic_ext
    UNION ALL
    SELECT format('sequence %s.%s start %s step %s last %s', schemaname, sequencename,
                  start_value, increment_by, last_value)
      FROM pg_sequences
    UNION ALL
    SELECT format('setting %s', s.setconfig) FROM pg_db_role_setting s
      JOIN pg_database d ON d.oid = s.setdatabase WHERE d.datname = current_database()
    UNION ALL
    SELECT format('database connections %s allowed %s acl %s', datconnlimit, datallowconn,
                  datacl)
      FROM pg_database WHERE datname = current_database()
    UNION ALL
    SELECT format('prepared %s', gid) FROM pg_prepared_xacts WHERE database = current_database()
    UNION ALL
    SELECT format('slot %s', slot_name) FROM pg_replication_slots
     WHERE database = current_database()
) AS lines ORDER BY line
"""

# Leaf tables only: a partitioned table (the events table, decision 31) holds no rows of its
# own, and COPY refuses one; its partitions are listed, and reset through it (_PARTITIONS).
_TABLES = f"""
SELECT format('%I.%I', n.nspname, c.relname) FROM pg_class c
  JOIN pg_namespace n ON n.oid = c.relnamespace
 WHERE c.oid IN ({_USER_RELATIONS}) AND c.relkind = 'r'
 ORDER BY 1
"""
_PARTITIONS = """
SELECT format('%%I.%%I', rn.nspname, r.relname), format('%%I.%%I', ln.nspname, l.relname)
  FROM pg_class c JOIN pg_namespace cn ON cn.oid = c.relnamespace
  JOIN pg_class r ON r.oid = pg_partition_root(c.oid)
  JOIN pg_namespace rn ON rn.oid = r.relnamespace
  JOIN pg_partition_tree(r.oid) AS t ON t.isleaf
  JOIN pg_class l ON l.oid = t.relid JOIN pg_namespace ln ON ln.oid = l.relnamespace
 WHERE format('%%I.%%I', cn.nspname, c.relname) = ANY(%s) AND r.oid <> c.oid
"""

_FILE_SIZES = f"""
SELECT format('%I.%I', n.nspname, c.relname),
       pg_relation_size(c.oid)
       + coalesce((SELECT sum(pg_relation_size(i.indexrelid)) FROM pg_index i
                    WHERE i.indrelid = c.oid), 0)
       + CASE WHEN c.reltoastrelid <> 0 THEN pg_relation_size(c.reltoastrelid) ELSE 0 END
  FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
 WHERE c.oid IN ({_USER_RELATIONS}) AND c.relkind = 'r'
"""


def _tables(conn: psycopg.Connection[tuple[object, ...]]) -> list[str]:
    return [str(row[0]) for row in conn.execute(_TABLES)]


def _file_sizes(conn: psycopg.Connection[tuple[object, ...]]) -> dict[str, int]:
    """Each table's bytes on disk, its indexes' and its TOAST table's included."""
    return {str(table): int(str(size)) for table, size in conn.execute(_FILE_SIZES)}


def state(conn: psycopg.Connection[tuple[object, ...]]) -> list[str]:
    """Everything a test could tell apart between two databases of the template's schema:
    schema objects, settings, sequences, planner statistics, and every row."""
    lines = [str(row[0]) for row in conn.execute(_STATE_QUERY)]
    for table in _tables(conn):
        rows = conn.execute(
            sql.SQL("SELECT t::text FROM {} AS t ORDER BY 1").format(sql.SQL(table))
        )
        lines.extend(f"row {table} {row[0]}" for row in rows)
    return lines


def _fresh_name() -> str:
    return f"jl_test_{uuid.uuid4().hex[:12]}"


class TestDatabases:
    """Copies of ``template`` for tests, reset and reused when that restores them exactly."""

    __test__ = False  # not a test class, whatever pytest's name pattern says

    def __init__(self, template: str, admin: Connect, url_for: Callable[[str], str]) -> None:
        self._template = template
        self._admin = admin
        self._url_for = url_for
        self._spare: deque[str] = deque()
        self._reference: list[str] | None = None
        self._rows: dict[str, bytes] = {}
        self._sizes: dict[str, int] = {}
        self._local = threading.local()  # an admin session per thread
        self._sessions: list[psycopg.Connection[tuple[object, ...]]] = []
        self._resets = ThreadPoolExecutor(max_workers=1, thread_name_prefix="jl-db-reset")
        self._pending: deque[Future[None]] = deque()
        self.created = 0
        self.reused = 0
        self.dropped = 0

    def _connect(self, name: str) -> psycopg.Connection[tuple[object, ...]]:
        return psycopg.connect(self._url_for(name), autocommit=True, connect_timeout=5)

    def _execute(
        self, query: sql.Composable | str, params: list[object] | None = None
    ) -> list[tuple[object, ...]]:
        """Run ``query`` on the admin session (one for the whole session, reopened if lost)."""
        session: psycopg.Connection[tuple[object, ...]] | None = getattr(
            self._local, "session", None
        )
        if session is None or session.closed or session.broken:
            session = self._local.session = self._admin("postgres")
            self._sessions.append(session)
        cursor = session.execute(query, params)
        return cursor.fetchall() if cursor.description is not None else []

    def _create(self) -> str:
        name = _fresh_name()
        self._execute(
            sql.SQL("CREATE DATABASE {} TEMPLATE {}").format(
                sql.Identifier(name), sql.Identifier(self._template)
            )
        )
        self.created += 1
        if self._reference is None:  # a fresh copy is what every reset must reproduce
            with self._connect(name) as conn:
                self._reference = state(conn)
                self._sizes = _file_sizes(conn)
                for table in _tables(conn):
                    copy_out = sql.SQL("COPY {} TO STDOUT").format(sql.SQL(table))
                    with conn.cursor().copy(copy_out) as copy:
                        self._rows[table] = b"".join(bytes(block) for block in copy)
        return name

    def take(self) -> str:
        """A database in the template's state that no other test is using."""
        while True:
            while self._pending and self._pending[0].done():
                self._pending.popleft().result()
            while self._spare:
                name = self._spare.popleft()
                if self._sessions_on(name) == 0:
                    self.reused += 1
                    return name
                self._drop(name)  # something connected to it after its reset
            # Two databases take turns: one is reset while the other serves the next test.
            if not self._pending or self.created - self.dropped < 2:
                return self._create()
            self._pending.popleft().result()

    def _sessions_on(self, name: str) -> int:
        [(count,)] = self._execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = %s", [name]
        )
        return int(str(count))

    def give_back(self, name: str) -> None:
        """Reset ``name`` for reuse if that restores the template's state exactly, else drop
        it, on a thread of its own while the next test runs."""
        self._pending.append(self._resets.submit(self._recycle, name))

    def _recycle(self, name: str) -> None:
        try:
            if self._reset(name):
                # Renamed, so that whatever still holds the old name (a pool or listener the
                # test left running, reconnecting) finds no database, as it did after a drop.
                spare = _fresh_name()
                self._execute(
                    sql.SQL("ALTER DATABASE {} RENAME TO {}").format(
                        sql.Identifier(name), sql.Identifier(spare)
                    )
                )
                self._spare.append(spare)
                return
        except psycopg.Error:
            pass  # whatever went wrong, dropping the database is always right
        self._drop(name)

    def _end_sessions(self, name: str) -> bool:
        """End every session on ``name`` and wait until the server has (it only signals)."""
        deadline = time.monotonic() + SESSIONS_GONE_S
        while True:
            pids = self._execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                " WHERE datname = %s AND pid <> pg_backend_pid()",
                [name],
            )
            if not pids:
                return True
            if time.monotonic() > deadline:
                return False
            time.sleep(0.005)

    def _reset(self, name: str) -> bool:
        if self._reference is None or not self._end_sessions(name):
            return False
        with self._connect(name) as conn:
            conn.execute("SET lock_timeout = '2s'")
            sizes = _file_sizes(conn)
            if set(sizes) != set(self._sizes):
                return False
            # A table whose files are the size of the template's was not written (a write
            # that was rolled back or deleted still leaves its dead rows' pages): it is left
            # alone; the template's rows are written back wherever they were truncated.
            written = sorted(t for t, size in sizes.items() if size != self._sizes[t])
            written += [t for t, data in self._rows.items() if data and t not in written]
            # A written partition is truncated through its root (whose column owns the
            # identity sequence), and so are its siblings: all of them are written back.
            truncated = list(written)
            for found_root, found_leaf in conn.execute(_PARTITIONS, [written]).fetchall():
                root, leaf = str(found_root), str(found_leaf)
                if leaf in truncated:
                    truncated.remove(leaf)
                if root not in truncated:
                    truncated.append(root)
                if leaf not in written:
                    written.append(leaf)
            with conn.transaction():
                conn.execute(
                    sql.SQL("TRUNCATE {} RESTART IDENTITY").format(
                        sql.SQL(", ").join(sql.SQL(table) for table in truncated)
                    )
                )
                for table in written:
                    data = self._rows[table]
                    if data:
                        copy_in = sql.SQL("COPY {} FROM STDIN").format(sql.SQL(table))
                        with conn.cursor().copy(copy_in) as copy:
                            copy.write(data)
            return state(conn) == self._reference

    def _drop(self, name: str) -> None:
        self.dropped += 1
        self._execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        )

    def close(self) -> None:
        """Drop the spare databases; end the admin session."""
        try:
            self._resets.shutdown(wait=True)
            while self._pending:
                self._pending.popleft().result()
            while self._spare:
                self._drop(self._spare.popleft())
        finally:
            for session in self._sessions:
                session.close()

    def summary(self) -> str:
        return (
            f"PostgreSQL test databases: {self.created} copied from the template, "
            f"{self.reused} handed out again after a reset, {self.dropped} dropped"
        )
