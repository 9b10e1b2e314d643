"""Bounds on how long a connection may wait on a server that is gone without a word.

A host cut off the network (a dead switch port, a partition, a NAT or firewall that dropped
the connection's state) sends and receives nothing, and no error comes: TCP keeps
retransmitting unacknowledged bytes for about 15 minutes (``tcp_retries2``), and a
connection with nothing unacknowledged — a statement delivered before the cut, whose answer
was lost — waits for that answer for ever: libpq's keepalives are on, but the kernel's
default first probe comes after two hours of silence. If the server ended that session
meanwhile (its idle-in-transaction timeout, the watchdog, a restart) and forgot the socket,
the call never ends, not even once the network is back (found by the chaos suite's network
cut: ``tests/chaos/test_chaos_netns.py``).

Every connection a PostgreSQL store opens (pooled, its own, the LISTEN loop's) therefore
carries these libpq parameters unless the URL sets them itself: a keepalive probe after
:data:`KEEPALIVES_IDLE_S` of silence, then every :data:`KEEPALIVES_INTERVAL_S`, the
connection given up after :data:`KEEPALIVES_COUNT` unanswered ones; and
``tcp_user_timeout``: sent bytes unacknowledged for :data:`TCP_USER_TIMEOUT_S` end the
connection. A server merely busy with a long statement still acknowledges at the TCP level
and answers probes from its kernel, so neither bound cuts a slow query short.
"""

from __future__ import annotations

from psycopg import pq
from psycopg.conninfo import conninfo_to_dict, make_conninfo

KEEPALIVES_IDLE_S = 5
KEEPALIVES_INTERVAL_S = 2
KEEPALIVES_COUNT = 3
TCP_USER_TIMEOUT_S = 15
"""With the keepalives, a silent peer is given up within about 11 s of silence on an idle
connection and 15 s on one with bytes in flight: long against any network hiccup, short
against a lease's recovery (the reaper has taken the leases by then; this only decides
when the cut-off process finds out, and that a call cannot hang for ever)."""

TCP_USER_TIMEOUT_LIBPQ = 120000
"""The libpq that knows ``tcp_user_timeout`` (12; an older one refuses the parameter)."""

DEAD_PEER_PARAMS = {
    "keepalives": "1",
    "keepalives_idle": str(KEEPALIVES_IDLE_S),
    "keepalives_interval": str(KEEPALIVES_INTERVAL_S),
    "keepalives_count": str(KEEPALIVES_COUNT),
    **(
        {"tcp_user_timeout": str(TCP_USER_TIMEOUT_S * 1000)}
        if pq.version() >= TCP_USER_TIMEOUT_LIBPQ
        else {}
    ),
}


def with_dead_peer_bounds(conninfo: str) -> str:
    """``conninfo`` (a URL or libpq string) with :data:`DEAD_PEER_PARAMS` where it sets none
    of its own, as a libpq string. On a Unix-domain socket libpq ignores them."""
    params = conninfo_to_dict(conninfo)
    for key, value in DEAD_PEER_PARAMS.items():
        params.setdefault(key, value)
    return make_conninfo("", **params)
