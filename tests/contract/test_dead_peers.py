"""Every connection a PostgreSQL store opens carries bounds on how long it waits on a silent
peer (keepalives, ``tcp_user_timeout``: ``ledger/store/postgres/dead_peers.py``), unless the
URL sets its own. What they prevent — a call on a connection whose server forgot it while the
host was cut off, waiting for ever — is shown in ``tests/chaos/test_chaos_netns.py``."""

from __future__ import annotations

import pytest

from ledger.store.postgres import PostgresStore
from ledger.store.postgres.dead_peers import DEAD_PEER_PARAMS, with_dead_peer_bounds

pytestmark = pytest.mark.postgres


def test_pooled_and_own_connections_carry_the_dead_peer_bounds(pg_url: str) -> None:
    """A store's pooled connections and the LISTEN loop's parameters carry the keepalive and
    user-timeout bounds."""
    store = PostgresStore(pg_url, pool_size=1)
    try:
        with store.datastore.get_connection() as conn:
            used = conn.info.get_parameters()
        for key, value in DEAD_PEER_PARAMS.items():
            assert used.get(key) == value, key
        assert "keepalives_idle=5" in store.conninfo  # what the LISTEN loop connects with
    finally:
        store.close()


def test_a_url_keeps_its_own_keepalive_settings(pg_url: str) -> None:
    """A URL that sets a bound itself keeps its value; the others are added."""
    store = PostgresStore(f"{pg_url}?keepalives_idle=30&keepalives=1", pool_size=1)
    try:
        with store.datastore.get_connection() as conn:
            used = conn.info.get_parameters()
        assert used["keepalives_idle"] == "30"
        assert used["keepalives_count"] == DEAD_PEER_PARAMS["keepalives_count"]
    finally:
        store.close()


def test_with_dead_peer_bounds_keeps_every_other_parameter() -> None:
    """The URL's own parameters survive the rewrite into a libpq string."""
    bounded = with_dead_peer_bounds("postgresql://u:p%40ss@db.example:5433/jobs?sslmode=require")
    assert "password='p@ss'" in bounded or "password=p@ss" in bounded
    for part in ("host=db.example", "port=5433", "dbname=jobs", "sslmode=require", "user=u"):
        assert part in bounded
