"""bench/compare.py's own checks: durability refusals, WAL attribution, depth, configurations."""

from __future__ import annotations

import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path[:0] = [str(BENCH), str(BENCH / "peers")]

import compare_configs as configs  # noqa: E402
import probe  # noqa: E402
from compare_server import DurabilityError, check_database, wal  # noqa: E402


def _execute(url: str, *statements: str) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        for statement in statements:
            conn.execute(statement)


@pytest.fixture
def other_pg_url(empty_pg_url: str) -> Iterator[str]:
    """A second empty database on the same server, for writes that must not be counted."""
    server = empty_pg_url.rsplit("/", 1)[0]
    name = f"jl_empty_{uuid.uuid4().hex[:12]}"
    _execute(f"{server}/postgres", f'CREATE DATABASE "{name}"')
    try:
        yield f"{server}/{name}"
    finally:
        _execute(f"{server}/postgres", f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def test_database_override_of_synchronous_commit_fails_loudly(empty_pg_url: str) -> None:
    """A per-database synchronous_commit override makes the measurement fail, not pass."""
    name = empty_pg_url.rsplit("/", 1)[1]
    assert check_database(empty_pg_url, "pgqueuer") == []
    _execute(empty_pg_url, f'ALTER DATABASE "{name}" SET synchronous_commit = off')
    with pytest.raises(DurabilityError, match="synchronous_commit=off"):
        check_database(empty_pg_url, "pgqueuer")


def test_unlogged_job_tables_fail_but_declared_coordination_tables_pass(
    empty_pg_url: str,
) -> None:
    """oban's UNLOGGED leader/producer tables are allowed for oban only; any other fails."""
    _execute(empty_pg_url, "CREATE UNLOGGED TABLE oban_leaders (name text)")
    assert check_database(empty_pg_url, "oban-py") == ["public.oban_leaders"]
    with pytest.raises(DurabilityError, match="oban_leaders"):
        check_database(empty_pg_url, "pgqueuer")
    _execute(empty_pg_url, "CREATE UNLOGGED TABLE jobs (id int)")
    with pytest.raises(DurabilityError, match=r"public\.jobs"):
        check_database(empty_pg_url, "oban-py")


def test_wal_is_attributed_to_the_measured_database_only(
    empty_pg_url: str, other_pg_url: str
) -> None:
    """Writes to another database in the same window count in the raw LSN difference only."""
    _execute(empty_pg_url, "CREATE TABLE mine (x int)")
    _execute(other_pg_url, "CREATE TABLE theirs (x int)")
    lsn = {"process_start": probe.current_lsn(empty_pg_url)}
    _execute(empty_pg_url, "INSERT INTO mine SELECT generate_series(1, 1000)")
    _execute(other_pg_url, "INSERT INTO theirs SELECT generate_series(1, 20000)")
    _execute(empty_pg_url, "INSERT INTO mine SELECT generate_series(1, 1000)")
    lsn["process_end"] = probe.current_lsn(empty_pg_url)

    figures = wal(empty_pg_url, lsn, windows=[("process_start", "process_end")]).as_json()

    assert figures["wal_attributed"]
    # 2,000 small heap inserts (~70 B of WAL each) against the other database's 20,000.
    assert 2000 * 50 < figures["wal_bytes"] < figures["wal_bytes_raw"] / 4


def test_cpu_over_the_drain_counts_the_clients_work_within_the_hosts(empty_pg_url: str) -> None:
    """The client's CPU over the timed phase is this process's, and is inside the host's busy
    time (every core); work the server does for it shows in the host's figure only."""
    figures = probe.Probe.open(empty_pg_url)
    figures.before_process()
    total = 0
    for i in range(3_000_000):  # client work: a fixed amount of it, not a span of time
        total += i * i
    _execute(empty_pg_url, "SELECT count(*) FROM generate_series(1, 3000000)")  # server work
    figures.after_process()

    cpu = figures.as_json()["cpu"]
    assert total > 0 and cpu is not None and cpu["host_s"] is not None
    assert cpu["client_s"] > 0.05
    # /proc/stat counts in ticks of 10 ms: allow two of them.
    assert cpu["host_s"] >= cpu["client_s"] - 0.02
    assert cpu["wall_s"] >= cpu["client_s"] - 0.02


def test_depth_is_read_from_commit_order_and_transactions(empty_pg_url: str) -> None:
    """Max leased is the peak of the running sum; claims and flushes group by transaction."""
    _execute(
        empty_pg_url,
        "CREATE TABLE log (id serial, kind text)",
        "INSERT INTO log (kind) SELECT 'claim' FROM generate_series(1, 3)",
        "INSERT INTO log (kind) SELECT 'claim' FROM generate_series(1, 2)",
        "INSERT INTO log (kind) SELECT 'done' FROM generate_series(1, 4)",
        "INSERT INTO log (kind) SELECT 'claim' FROM generate_series(1, 1)",
        "INSERT INTO log (kind) SELECT 'done' FROM generate_series(1, 2)",
    )
    sql = probe.DepthSql(
        claims="SELECT count(*) FROM log WHERE kind = 'claim' GROUP BY xmin",
        flushes="SELECT count(*) FROM log WHERE kind = 'done' GROUP BY xmin",
        leases="SELECT id, CASE kind WHEN 'claim' THEN 1 ELSE -1 END FROM log ORDER BY id",
    )

    depth = probe.depth(empty_pg_url, sql)

    assert depth["max_leased"] == 5
    assert depth["claim"] == {"count": 3, "jobs": 6, "mean": 2.0, "median": 2, "max": 3}
    assert depth["flush"]["count"] == 2 and depth["flush"]["max"] == 4
    assert depth["covered"] == 6


def test_each_system_runs_at_each_declared_depth_and_jobledger_at_every_peer_depth() -> None:
    """Default: every system at C and 11·C plus PgQueuer uncapped; the sweep adds jobledger at
    every depth a peer configuration declares."""
    default = configs.plan_configs(10, (10, 110), False, [s.name for s in configs.SYSTEMS])
    depths = {(c.system.name, c.depth) for c in default}
    for system in configs.BY_NAME:
        assert {(system, 10), (system, 110)} <= depths
    assert ("pgqueuer", None) in depths

    swept = configs.plan_configs(10, (10, 110), True, [s.name for s in configs.SYSTEMS])
    peer_depths = {c.depth for c in swept if c.system.name != "jobledger" and c.depth}
    ours = {c.depth for c in swept if c.system.name == "jobledger"}
    assert peer_depths <= ours
    assert len({c.key for c in swept}) == len(swept)


def test_an_uncapped_peer_is_held_against_jobledger_no_deeper_than_it_reached() -> None:
    """An uncapped configuration is paired with the deepest jobledger one within its reach."""
    references = [configs.jobledger(10, d) for d in (10, 50, 110)]
    uncapped = configs.pgqueuer(55, None)
    capped = configs.pgqueuer(25, 50)

    assert configs.matching_reference(capped, 999, references) == references[1]
    assert configs.matching_reference(uncapped, 120, references) == references[2]
    assert configs.matching_reference(uncapped, 60, references) == references[1]
    assert configs.matching_reference(uncapped, 3, references) == references[0]
