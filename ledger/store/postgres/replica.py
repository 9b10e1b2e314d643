"""A ledger read on a PostgreSQL streaming replica (a hot standby), and how far behind its
primary that replica is.

Nothing here writes. A standby refuses writes itself (SQLSTATE 25006, mapped to
:class:`~ledger.core.errors.ReadOnlyDatabaseError`); every session of this store is also
opened with ``default_transaction_read_only=on``, so a read URL that names a primary (or a
standby since promoted) is not written through either. The reader skips what would write
(:attr:`~ledger.store.store.Store.read_only`: the tracked projections' catch-up). A standby
cannot ``LISTEN`` (notifications are not replicated), so followers of this store poll.

The session settings every pooled connection gets (the idle-in-transaction timeout) are
plain ``SET``\\ s, which a standby accepts; a long read may still be cancelled by the standby
when replaying WAL conflicts with it (SQLSTATE 40001, ``store.concurrency_conflict``; see
``docs/scaling.md`` for ``max_standby_streaming_delay`` and ``hot_standby_feedback``).
"""

from __future__ import annotations

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from ledger.store.postgres.store import PostgresStore
from ledger.store.replica import ReplicaLag

PRIMARY_CONNECT_TIMEOUT_S = 2
"""How long a lag reading waits for the primary (libpq's least): a replica is read to spare
the primary, and must stay readable while the primary is away."""

READ_ONLY_OPTION = "-c default_transaction_read_only=on"


def read_only_conninfo(conninfo: str) -> str:
    """``conninfo`` with every session read-only by default (its own ``options`` kept)."""
    params = conninfo_to_dict(conninfo)
    options = str(params.get("options") or "")
    params["options"] = f"{options} {READ_ONLY_OPTION}".strip()
    return make_conninfo("", **params)


class PostgresReplicaStore(PostgresStore):
    """The ledger in a PostgreSQL streaming replica, for reads only (``primary``: its
    primary's URL, if known, for :meth:`replica_lag`'s WAL comparison)."""

    has_notifications = False
    read_only = True

    def __init__(self, conninfo: str, *, primary: str | None = None, pool_size: int = 2) -> None:
        super().__init__(read_only_conninfo(conninfo), pool_size=pool_size)
        self.where = self.where.replace("PostgreSQL database", "PostgreSQL replica", 1)
        self.primary = primary

    def replica_lag(self) -> ReplicaLag:
        # The primary first: a position read after the standby's would count WAL written
        # after the replay position was taken.
        primary_lsn, primary_id, verdict = self._primary_position()
        [row] = self.read("replica_status", {"primary_lsn": primary_lsn})
        if not row["standby"]:
            return ReplicaLag(False, False, 0.0, None, None, "not a standby")
        behind = row["behind_bytes"]
        if verdict == "compared" and primary_id != row["system_id"]:
            behind, verdict = None, "another cluster"
        if behind is not None:
            behind = max(0, int(behind))  # replay may have passed the position read before
        caught_up = behind == 0 or (row["streaming"] and row["replayed_all"])
        age = row["replayed_age_s"]
        lag_s = 0.0 if caught_up else (None if age is None else max(0.0, float(age)))
        return ReplicaLag(True, bool(row["streaming"]), lag_s, row["replay_lsn"], behind, verdict)

    def _primary_position(self) -> tuple[str | None, str | None, str]:
        """The primary's WAL position and system identifier, and the verdict on them."""
        if self.primary is None:
            return None, None, "not named"
        try:
            with psycopg.connect(
                self.primary, autocommit=True, connect_timeout=PRIMARY_CONNECT_TIMEOUT_S
            ) as conn:
                cursor = conn.execute(self.sql["primary_position"])
                lsn, system_id = cursor.fetchone() or (None, None)
        except psycopg.errors.ObjectNotInPrerequisiteState:
            return None, None, "not a primary"  # itself in recovery: it has no WAL of its own
        except psycopg.Error:
            return None, None, "unreachable"
        return str(lsn), str(system_id), "compared"
