"""Tampering with a ledger by hand, as someone with write access to its database would: SQL
on a connection of its own, outside the ledger."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from typing import Any

import psycopg

from ledger.store.config import sqlite_path


def is_postgres(url: str) -> bool:
    return url.startswith("postgresql")


def run_sql(url: str, statements: list[str], params: tuple[Any, ...] = ()) -> list[Any]:
    """Run ``statements`` in one transaction; the last one's rows. ``params`` bind to the
    last statement (``%s`` on PostgreSQL, ``?`` on SQLite)."""
    rows: list[Any] = []
    last = len(statements) - 1
    if is_postgres(url):
        with psycopg.connect(url) as conn:
            for n, statement in enumerate(statements):
                sql = statement.replace("?", "%s") if n == last and params else statement
                bound = params if n == last and params else None
                cursor = conn.execute(sql.encode(), bound)
                rows = cursor.fetchall() if cursor.description else []
        return rows
    with closing(sqlite3.connect(sqlite_path(url))) as conn:
        for n, statement in enumerate(statements):
            rows = conn.execute(statement, params if n == last else ()).fetchall()
        conn.commit()
    return rows


def id_column(url: str) -> str:
    """The events' notification id column: PostgreSQL's, or SQLite's rowid."""
    return "notification_id" if is_postgres(url) else "rowid"


def event_at(url: str, position: int) -> tuple[str, int, str, bytes]:
    """(stream id as stored, version, topic, state) of the event at ``position``."""
    [row] = run_sql(
        url,
        [
            f"SELECT originator_id, originator_version, topic, state FROM jl_events "
            f"WHERE {id_column(url)} = {int(position)}"
        ],
    )
    return str(row[0]), int(row[1]), str(row[2]), bytes(row[3])


def set_state(url: str, position: int, state: bytes) -> None:
    run_sql(
        url,
        [f"UPDATE jl_events SET state = ? WHERE {id_column(url)} = {int(position)}"],
        (state,),
    )


def set_topic(url: str, position: int, topic: str) -> None:
    run_sql(
        url,
        [f"UPDATE jl_events SET topic = ? WHERE {id_column(url)} = {int(position)}"],
        (topic,),
    )


def delete_event(url: str, position: int) -> None:
    run_sql(url, [f"DELETE FROM jl_events WHERE {id_column(url)} = {int(position)}"])


def swap_positions(url: str, a: int, b: int) -> None:
    """Reorder two events: each takes the other's notification id."""
    column = id_column(url)
    run_sql(
        url,
        [
            f"UPDATE jl_events SET {column} = -1 WHERE {column} = {int(a)}",
            f"UPDATE jl_events SET {column} = {int(a)} WHERE {column} = {int(b)}",
            f"UPDATE jl_events SET {column} = {int(b)} WHERE {column} = -1",
        ],
    )
