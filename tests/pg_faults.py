"""PostgreSQL faults for tests: drop a database's connections, restart a server of the test's own.

:func:`drop_connections` terminates the ledger's backends on the test's own database through
an admin connection and waits until the server has really ended them (``pg_terminate_backend``
only sends the signal), so what the test does next meets dead sockets, not a race.

:class:`ThrowawayCluster` is a PostgreSQL server the test creates (``initdb`` in a temporary
directory, its own port, trust auth) and may stop and start at will; the shared server is
never restarted. As root, the binaries run as the ``postgres`` system user (``initdb``
refuses root). ``ThrowawayCluster(standby_of=primary)`` is a hot standby of another one: a
``pg_basebackup -R`` of it, streaming from it on a port of its own;
:func:`wait_for_replay` waits until a standby has replayed everything its primary wrote.
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Sequence
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import psycopg
from psycopg.conninfo import conninfo_to_dict

GONE_TIMEOUT_S = 10.0
POOLED = 6
"""Connections :func:`fill_pool` leaves idle in a pool (more than any old retry count)."""


def fill_pool(store: Any, n: int = POOLED) -> None:
    """Check out ``n`` connections of a PostgreSQL store at once and return them: its pool
    then holds ``n`` idle, as a busy worker's does."""
    with ExitStack() as stack:
        for _ in range(n):
            stack.enter_context(store.datastore.get_connection()).execute("SELECT 1")


def _admin_url(url: str) -> str:
    params = conninfo_to_dict(url)
    host, port = params.get("host", "127.0.0.1"), params.get("port", "5432")
    return f"postgresql://{params.get('user', 'postgres')}@{host}:{port}/postgres"


def backends_of(url: str, *, query_like: str = "%") -> list[int]:
    """Pids of the client backends connected to ``url``'s database (``query_like``: only those
    whose current or last statement matches)."""
    dbname = conninfo_to_dict(url)["dbname"]
    with psycopg.connect(_admin_url(url), autocommit=True) as admin:
        rows = admin.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()"
            " AND backend_type = 'client backend' AND query LIKE %s",
            [dbname, query_like],
        ).fetchall()
    return [int(row[0]) for row in rows]


def drop_connections(url: str, *, pids: Sequence[int] | None = None) -> int:
    """Terminate ``pids`` (default: every client connection to ``url``'s database) and wait
    until they are gone; how many were terminated."""
    targets = list(backends_of(url) if pids is None else pids)
    if not targets:
        return 0
    with psycopg.connect(_admin_url(url), autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(pid) FROM unnest(%s::int[]) AS pid", [targets])
        deadline = time.monotonic() + GONE_TIMEOUT_S
        while time.monotonic() < deadline:
            alive = admin.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE pid = ANY(%s)", [targets]
            ).fetchone()
            if alive is not None and alive[0] == 0:
                return len(targets)
            time.sleep(0.01)
    raise AssertionError(f"backends {targets} still alive {GONE_TIMEOUT_S} s after terminate")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _bin(name: str) -> str:
    found = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    if not found:
        raise AssertionError(f"no PostgreSQL {name} under /usr/lib/postgresql/*/bin")
    return found[-1]


class ThrowawayCluster:
    """A PostgreSQL server of the test's own, in a temporary directory of its own (call
    :meth:`remove` at the end). The directory is under the system's temporary root, not
    pytest's (which only its owner may enter, and the server runs as ``postgres``).

    ``standby_of``: instead of a new cluster, a hot standby of that one (its base backup,
    with ``-R`` writing the connection back to it, so it streams from the primary once
    started; initdb's trust rules already admit replication from 127.0.0.1)."""

    def __init__(self, *, standby_of: ThrowawayCluster | None = None) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="jl_cluster_"))
        self.data = self.root / "data"
        self.port = _free_port()
        self.url = f"postgresql://postgres@127.0.0.1:{self.port}"
        self.log = self.root / "server.log"
        if os.geteuid() == 0:
            shutil.chown(self.root, "postgres", "postgres")
        if standby_of is None:
            self._run(_bin("initdb"), "-D", str(self.data), "-U", "postgres", "--auth=trust", "-N")
        else:
            self._run(
                _bin("pg_basebackup"), "-D", str(self.data), "-h", "127.0.0.1",
                "-p", str(standby_of.port), "-U", "postgres", "-R", "-X", "stream",
                "-c", "fast", "-N",
            )  # fmt: skip
        self.start()

    def _run(self, *argv: str) -> None:
        prefix = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
        subprocess.run([*prefix, *argv], check=True, capture_output=True, timeout=120)

    def start(self) -> None:
        """Start the server and wait until it accepts connections."""
        options = f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 -c fsync=off"
        self._run(
            _bin("pg_ctl"), "-D", str(self.data), "-o", options, "-l", str(self.log), "-w",
            "start",
        )  # fmt: skip

    def stop(self) -> None:
        """Stop the server at once (fast shutdown: every client connection is dropped)."""
        self._run(_bin("pg_ctl"), "-D", str(self.data), "-m", "fast", "-w", "stop")

    def create_database(self, name: str) -> str:
        with psycopg.connect(f"{self.url}/postgres", autocommit=True) as admin:
            admin.execute(f'CREATE DATABASE "{name}"')
        return f"{self.url}/{name}"

    def drop_database(self, name: str) -> None:
        with psycopg.connect(f"{self.url}/postgres", autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    def scalar(self, sql: str, params: Sequence[Any] = ()) -> Any:
        """One value of one query on the ``postgres`` database (an admin's look)."""
        with psycopg.connect(f"{self.url}/postgres", autocommit=True) as admin:
            row = admin.execute(sql, params).fetchone()
        assert row is not None
        return row[0]

    def remove(self) -> None:
        """Stop the server (if running) and delete its files."""
        if (self.data / "postmaster.pid").exists():
            self._run(_bin("pg_ctl"), "-D", str(self.data), "-m", "immediate", "-w", "stop")
        shutil.rmtree(self.root, ignore_errors=True)


def wait_for_replay(primary: ThrowawayCluster, standby: ThrowawayCluster) -> str:
    """Wait until ``standby`` has replayed the WAL ``primary`` had written when called (its
    ``pg_current_wal_lsn()``); that position. Polls the standby's replay position: nothing
    is assumed to have arrived after any amount of time."""
    target = str(primary.scalar("SELECT pg_current_wal_lsn()::text"))
    deadline = time.monotonic() + GONE_TIMEOUT_S
    while time.monotonic() < deadline:
        if standby.scalar("SELECT pg_last_wal_replay_lsn() >= %s::pg_lsn", [target]):
            return target
        time.sleep(0.01)
    raise AssertionError(f"the standby did not replay up to {target} in {GONE_TIMEOUT_S} s")
