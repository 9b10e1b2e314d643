"""The migration lock of a SQLite ledger: one schema change (``init``, ``migrate``, a projection
rebuild) at a time per file, across processes.

Each schema statement is one ``BEGIN IMMEDIATE`` transaction, which SQLite's write lock already
runs one at a time, but a migration is several: three ``migrate`` runs over a stale queue view
all rebuilt into the one shadow table ``jl_queue__rebuild`` and two failed with ``UNIQUE
constraint failed: jl_queue__rebuild.job_id``. SQLite's own lock cannot be held across them (the
rebuild's writes need it), so the lock is an ``flock`` on a file beside the database,
``<database>.migrate-lock``, there only while a change runs: released when its holder ends,
however it ends. Never on the
database file itself, nor its ``-wal``/``-shm``: SQLite locks those with POSIX locks, which
closing any other descriptor of the same file in this process would silently drop.

Where ``flock`` does not exist (Windows) there is no lock: run one ``migrate`` at a time there.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from ledger.core.errors import MigrationBusyError

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

LOCK_SUFFIX = ".migrate-lock"
POLL_S = 0.1
"""How often a waiting change tries the lock again (``flock`` itself cannot time out)."""

log = logging.getLogger("jobledger.migrate")


@contextmanager
def migration_lock(
    path: str,
    where: str,
    wait_s: float,
    *,
    pause: Callable[[float], None] = time.sleep,
    monotonic: Callable[[], float] = time.monotonic,
) -> Iterator[None]:
    """Hold the lock of the database at ``path`` for the block; wait for it up to ``wait_s``
    if another process holds it (0: do not wait). The lock file is removed on release."""
    if fcntl is None or path in ("", ":memory:"):
        yield
        return
    lock_path = path + LOCK_SUFFIX
    fd = _take(lock_path)
    if fd is None:
        if wait_s <= 0:
            raise MigrationBusyError(
                f"another jobledger init or migrate is running on {where}; "
                "run this one again once it has finished"
            )
        log.warning(
            "another jobledger init or migrate is running on %s; waiting up to %g s for it",
            where,
            wait_s,
        )
        deadline = monotonic() + wait_s
        while (fd := _take(lock_path)) is None:
            if monotonic() >= deadline:
                raise MigrationBusyError(
                    f"another jobledger init or migrate has been running on {where} for "
                    f"over {wait_s:g} s; run this one again once it has finished"
                )
            pause(POLL_S)
    try:
        yield
    finally:
        # Unlinked while still locked: a waiter that locks the old file finds it gone and
        # tries again on a new one (_take), so the lock is never held twice.
        with contextlib.suppress(FileNotFoundError):
            os.unlink(lock_path)
        os.close(fd)


def _take(lock_path: str) -> int | None:
    """The lock file's descriptor, locked; ``None`` if another process holds the lock."""
    assert fcntl is not None
    while True:
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return None
        try:
            current = os.stat(lock_path).st_ino
        except FileNotFoundError:
            current = None
        if current == os.fstat(fd).st_ino:
            return fd
        os.close(fd)  # the holder removed this file as it let go: lock the new one
