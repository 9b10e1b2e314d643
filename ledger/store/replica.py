"""How far a streaming replica's copy of the ledger is behind its primary (no driver here:
the PostgreSQL replica store, :mod:`ledger.store.postgres.replica`, measures it)."""

from __future__ import annotations

import msgspec


class ReplicaLag(msgspec.Struct, frozen=True):
    """What a read from a replica could miss, measured just before the read.

    ``lag_s`` is PostgreSQL's usual estimate: 0 while the standby streams from its primary
    and has replayed all the WAL it received, else the age of the last transaction it
    replayed (``now() - pg_last_xact_replay_timestamp()``: the standby's clock against the
    primary's commit stamps, so skew between the hosts shows in it), which also grows while
    the primary is idle; ``None`` if it has replayed none since it started.
    ``behind_bytes`` is exact where ``lag_s`` estimates: the primary's current WAL position
    minus the standby's replay position, known only when the primary was named, reachable
    and is this standby's primary (same system identifier); the WAL counts every database
    of the cluster, not only the ledger's. A server that is not in recovery (a promoted
    standby, or a primary named as the read database) has ``standby`` false and no lag."""

    standby: bool
    """Whether the server is in recovery (a hot standby)."""
    streaming: bool
    """Whether its WAL receiver is streaming from the primary now."""
    lag_s: float | None
    replay_lsn: str | None
    """The WAL position it has replayed up to (``None`` if not a standby)."""
    behind_bytes: int | None
    primary: str
    """Why ``behind_bytes`` is known or not: ``compared``, ``not named``, ``unreachable``,
    ``another cluster`` (the named primary's system identifier differs), ``not a primary``."""
