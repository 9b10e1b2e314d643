"""A SQLite ledger file made for one operation, removed again if that operation fails.

``jobledger import`` into a path where no file exists creates the ledger first; an import
that then fails (a clash between two jobs of the file, a file changed under it, Ctrl-C, a full
disk) rolls its transaction back but would leave an empty, initialised ledger behind, which
the next import or a worker then takes for a real one. :func:`removed_on_failure` takes the
path before the store opens it (``O_CREAT | O_EXCL``: a file another process makes at the same
moment is that process's, never taken for ours), and removes it, with the journal files SQLite
made beside it, when the block raises. A file that existed before is never removed, nor is
anything for a PostgreSQL URL (its database exists before and after).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ledger.store.config import is_postgres, sqlite_path

SIDE_FILES = ("-wal", "-shm", "-journal")
"""What SQLite may write beside a database file (WAL, its index, a rollback journal)."""


@contextmanager
def removed_on_failure(url: str) -> Iterator[bool]:
    """Run the block; if ``url`` names a SQLite file that does not exist yet, create it empty
    first and remove it (and its side files that did not exist before) if the block raises.
    Yields whether the file was made here."""
    made = None if is_postgres(url) else _make(Path(sqlite_path(url)).expanduser())
    if made is None:
        yield False
        return
    side = [made.with_name(made.name + suffix) for suffix in SIDE_FILES]
    fresh = [path for path in side if not path.exists()]
    try:
        yield True
    except BaseException:
        for path in (made, *fresh):
            path.unlink(missing_ok=True)
        raise


def _make(path: Path) -> Path | None:
    """``path``, created empty here; ``None`` if it exists or cannot be made (the store then
    reports why when it opens it)."""
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
    except OSError:
        return None
    return path
