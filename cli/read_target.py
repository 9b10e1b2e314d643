"""Where a command that only reads reads: the streaming replica of ``--read-db``, with its lag,
else the ledger of ``--db``.

On a replica the lag is measured once, before the command reads, and shown two ways: one line
on stderr, always (text, JSON arrays and JSON Lines on stdout stay as they are); and, where
stdout is one JSON object, a ``replica`` member holding the same figures (``audit`` adds
``audit_lag``). Reading from ``--db`` prints and adds nothing. ``--db`` also names the primary
when it is a PostgreSQL URL: the replay position is then compared with the primary's WAL.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import click

from .database import POOL_SIZE, Settings, open_ledger
from ledger.api.reader import Reader
from ledger.api.shaping import plain
from ledger.store.config import is_postgres, open_store
from ledger.store.replica import ReplicaLag

_PRIMARY_NOTES = {
    "unreachable": "the primary (--db) did not answer",
    "another cluster": "--db is not its primary",
    "not a primary": "--db is not a primary",
}


@dataclass(frozen=True)
class Source:
    """The reader a command reads through, and the replica's lag if it is one."""

    reader: Reader
    lag: ReplicaLag | None = None
    audit_lag: int | None = None
    """With ``open_reader(audit=True)`` on a replica: the events its audit view lacks."""

    def tagged(self, shaped: dict[str, Any]) -> dict[str, Any]:
        """A JSON object for stdout, with the replica's figures added when read from one."""
        if self.lag is None:
            return shaped
        extra: dict[str, Any] = {"replica": plain(self.lag)}
        if self.audit_lag is not None:
            extra["audit_lag"] = self.audit_lag
        return {**shaped, **extra}


def lag_line(lag: ReplicaLag, audit_lag: int | None = None) -> str:
    """The stderr line, e.g. ``reading from a replica, 0.4 s behind the primary``."""
    if not lag.standby:
        return "reading from --read-db, which is not a standby (no replication lag)"
    seconds = "lag unknown" if lag.lag_s is None else f"{lag.lag_s:.1f} s behind the primary"
    notes = []
    if lag.lag_s is None:
        notes.append("no commit replayed since it started")
    if not lag.streaming:
        notes.append("not streaming from its primary now")
    if lag.behind_bytes is not None:
        notes.append(f"{lag.behind_bytes:,} bytes of WAL to replay")
    if lag.primary in _PRIMARY_NOTES:
        notes.append(_PRIMARY_NOTES[lag.primary])
    line = f"reading from a replica, {seconds}"
    if notes:
        line += f" ({'; '.join(notes)})"
    if audit_lag:
        line += (
            f"; its audit view is {audit_lag:,} events behind its history "
            "(caught up on the primary only)"
        )
    return line


def _open_primary(url: str) -> Reader:
    """A plain :class:`Reader` on the initialised ledger at ``url``: what ``open_ledger``
    opens, without importing the commands a read never calls (a read command's start-up)."""
    store = open_store(url, pool_size=POOL_SIZE)
    try:
        store.check_initialised()
    except BaseException:
        store.close()
        raise
    return Reader(store)


@contextmanager
def open_reader(
    settings: Settings, *, audit: bool = False, archive: bool = False
) -> Iterator[Source]:
    """The replica of ``--read-db`` (its lag line printed first), else the ledger of
    ``--db``; ``audit``: also measure how far the replica's audit view is behind.
    ``archive``: read the ledger of ``--db`` together with its archive where it has one
    (decision 31); the audit view is caught up on the hot ledger first, since the reader
    over both only reads."""
    if archive and settings.read_url is None:
        both = Reader.open_with_archive(settings.url, pool_size=POOL_SIZE)
        if both is not None:
            with both:
                if audit:
                    from ledger.views.catalog import AUDIT

                    with open_ledger(settings.url) as ledger:
                        ledger.catch_up([AUDIT.name])
                yield Source(both)
            return
    if settings.read_url is None:
        with _open_primary(settings.url) as reader:
            yield Source(reader)
        return
    primary = settings.url if is_postgres(settings.url) else None
    with Reader.open_replica(settings.read_url, primary=primary, pool_size=POOL_SIZE) as reader:
        lag = reader.replica_lag()
        assert lag is not None  # a replica's store always measures it
        audit_lag = reader.audit_lag() if audit else None
        click.echo(lag_line(lag, audit_lag), err=True)
        yield Source(reader, lag, audit_lag)
