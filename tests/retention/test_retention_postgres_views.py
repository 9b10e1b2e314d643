"""Retention on PostgreSQL detaches the view tables' month partitions with the events' one:
``jl_queue``, ``jl_audit`` and ``jl_dead_letters`` are partitioned by month of job id, so a
moved month leaves no row of its jobs in them without a copy or a delete, and a rebuild's
shadow swap keeps the partitions where a later move finds them (decision 31)."""

from __future__ import annotations

import json
from typing import Any

import psycopg
from month_jobs import MonthJobs, make_month_jobs, ok
from psycopg.rows import dict_row
from retention_helpers import reads_of

from ledger.store.postgres import partitions
from ledger.store.postgres.view_partitions import PARTITIONED_VIEWS

VIEW_TABLES = tuple(view.table for view in PARTITIONED_VIEWS)


def _rows(url: str, query: str, params: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    with psycopg.connect(url) as conn, conn.cursor(row_factory=dict_row) as cur:
        cur.execute(query.encode(), params)
        return cur.fetchall()


def _children(url: str, parent: str) -> list[str]:
    """The partitions of ``parent`` (schema-qualified or found on the search path)."""
    rows = _rows(
        url,
        "SELECT c.relname AS name FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
        "WHERE i.inhparent = to_regclass(%(t)s) ORDER BY 1",
        {"t": parent},
    )
    return [row["name"] for row in rows]


def _no_shadow_names(url: str) -> None:
    leftovers = _rows(url, "SELECT relname FROM pg_class WHERE relname LIKE '%%\\_\\_rebuild%%'")
    assert leftovers == []


def _hot_rows_of(url: str, jobs: list[str]) -> dict[str, int]:
    return {
        table: _rows(
            url, f"SELECT count(*) AS n FROM {table} WHERE job_id = ANY(%(ids)s::uuid[])",
            {"ids": jobs},
        )[0]["n"]
        for table in VIEW_TABLES
    }  # fmt: skip


def _set_rules(url: str) -> None:
    ok(url, "retention", "set", "--after", "30d")
    ok(url, "retention", "set", "--type", "slow", "--after", "5000w")


def _verified(url: str) -> None:
    ok(url, "projections", "verify")
    ok(url, "projections", "verify", "--include-archive")
    ok(url, "replay", "--check", "--all")


def test_a_new_database_partitions_the_view_tables_by_the_events_months(pg_url: str) -> None:
    """Each view table is partitioned on job_id with a default partition and a partition
    for each month the events table has, with the same bound; jl_audit's key leads with
    job_id and position keeps an index of its own."""
    make_month_jobs(pg_url)
    events = {
        name[len("jl_events") :]: bound
        for name, bound in (
            (r["name"], r["bound"])
            for r in _rows(
                pg_url,
                "SELECT c.relname AS name, pg_get_expr(c.relpartbound, c.oid) AS bound "
                "FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
                "WHERE i.inhparent = 'jl_events'::regclass AND c.relname <> 'jl_events_default'",
            )
        )
    }
    assert {"_p202001", "_p202002", "_p202003"} <= set(events)
    for table in VIEW_TABLES:
        kind_of = "SELECT relkind FROM pg_class WHERE oid = %(t)s::regclass"
        [kind] = _rows(pg_url, kind_of, {"t": table})
        assert kind["relkind"] == "p"
        bounds = {
            r["name"][len(table) :]: r["bound"]
            for r in _rows(
                pg_url,
                "SELECT c.relname AS name, pg_get_expr(c.relpartbound, c.oid) AS bound "
                "FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
                "WHERE i.inhparent = %(t)s::regclass",
                {"t": table},
            )
        }
        assert bounds.pop("_default") == "DEFAULT"
        assert bounds == events
    [key] = _rows(
        pg_url,
        "SELECT pg_get_constraintdef(oid) AS d FROM pg_constraint "
        "WHERE conrelid = 'jl_audit'::regclass AND contype = 'p'",
    )
    assert key["d"] == 'PRIMARY KEY (job_id, "position")'
    assert _rows(pg_url, "SELECT 1 FROM pg_indexes WHERE indexname = 'jl_audit_position_idx'")


def test_a_moved_month_leaves_no_view_rows_and_no_view_partitions_behind(pg_url: str) -> None:
    """A run moves January: the hot view tables hold no row of its jobs and no January
    partition, jl_archive's tables hold them as partitions of their own (with the archive's
    indexes only), every archived view row is of a job whose events moved (no other job's
    row can ride along), and the jobs read as before."""
    jobs = make_month_jobs(pg_url)
    moved = [str(job_id) for job_id in jobs.finished]
    before = {job_id: reads_of(pg_url, job_id) for job_id in jobs.finished}
    counts = _hot_rows_of(pg_url, moved)
    assert counts["jl_queue"] == 3 and counts["jl_audit"] > 3 and counts["jl_dead_letters"] == 1
    _set_rules(pg_url)

    run = json.loads(ok(pg_url, "retention", "run", "--json"))

    assert run["moved"] == 3
    assert run["rows"] == {"jl_events": run["rows"]["jl_events"], **counts}
    assert _hot_rows_of(pg_url, moved) == dict.fromkeys(VIEW_TABLES, 0)
    for table in VIEW_TABLES:
        assert f"{table}_p202001" not in _children(pg_url, table)
        assert f"{table}_p202002" in _children(pg_url, table)
        assert _children(pg_url, f"jl_archive.{table}") == [f"{table}_p202001"]
    archived_events = "SELECT DISTINCT originator_id AS id FROM jl_archive.jl_events_p202001"
    streams = {str(r["id"]) for r in _rows(pg_url, archived_events)}
    assert streams == set(moved)
    for table in VIEW_TABLES:
        archived = {
            str(r["job_id"])
            for r in _rows(pg_url, f"SELECT DISTINCT job_id FROM jl_archive.{table}_p202001")
        }
        assert archived <= streams
        count = "SELECT count(*) AS n FROM pg_index WHERE indrelid = to_regclass(%(t)s)"
        indexes = [
            _rows(pg_url, count, {"t": f"jl_archive.{t}"})[0]["n"]
            for t in (table, f"{table}_p202001")
        ]
        assert indexes[0] == indexes[1] > 0  # the claim and listing indexes left hot
    for job_id in jobs.finished:
        assert reads_of(pg_url, job_id) == before[job_id]
    _verified(pg_url)


def _kept_month_moves_too(pg_url: str, jobs: MonthJobs) -> None:
    """Drop the rule that kept February and move it."""
    ok(pg_url, "retention", "set", "--type", "slow", "--after", "30d")
    run = json.loads(ok(pg_url, "retention", "run", "--json"))
    assert run["job_ids"] == [str(jobs.kept)]
    for table in VIEW_TABLES:
        assert f"{table}_p202002" in _children(pg_url, f"jl_archive.{table}")


def test_a_rebuild_then_a_move_finds_the_partitions_by_their_names(pg_url: str) -> None:
    """``projections rebuild --all`` swaps in partitioned shadows whose partitions and
    indexes take the live names again (no ``__rebuild`` name left), keeps the same months,
    and a move after it detaches them; verify holds hot and hot + archive."""
    jobs = make_month_jobs(pg_url)
    partitions_before = {table: _children(pg_url, table) for table in VIEW_TABLES}
    before = {job_id: reads_of(pg_url, job_id) for job_id in jobs.finished}
    ok(pg_url, "projections", "rebuild", "--all")
    _no_shadow_names(pg_url)
    assert {table: _children(pg_url, table) for table in VIEW_TABLES} == partitions_before
    _set_rules(pg_url)

    run = json.loads(ok(pg_url, "retention", "run", "--json"))

    assert run["moved"] == 3 and run["rows"]["jl_queue"] == 3
    assert _hot_rows_of(pg_url, [str(j) for j in jobs.finished]) == dict.fromkeys(VIEW_TABLES, 0)
    for job_id in jobs.finished:
        assert reads_of(pg_url, job_id) == before[job_id]
    _verified(pg_url)


def test_a_move_then_a_rebuild_then_another_move(pg_url: str) -> None:
    """After January moved, a rebuild (from the hot history) leaves the hot tables without
    January and with February by its name; February then moves too, and verify holds hot
    and hot + archive after each step."""
    jobs = make_month_jobs(pg_url)
    _set_rules(pg_url)
    ok(pg_url, "retention", "run")
    ok(pg_url, "projections", "rebuild", "--all")
    _no_shadow_names(pg_url)
    for table in VIEW_TABLES:
        assert f"{table}_p202001" not in _children(pg_url, table)
        assert f"{table}_p202002" in _children(pg_url, table)
    _verified(pg_url)

    _kept_month_moves_too(pg_url, jobs)

    assert _hot_rows_of(pg_url, [str(jobs.kept)]) == dict.fromkeys(VIEW_TABLES, 0)
    _verified(pg_url)
    ok(pg_url, "projections", "rebuild", "--all")
    _no_shadow_names(pg_url)
    _verified(pg_url)


def test_reads_by_position_and_the_idempotency_lookup_stay_indexed(pg_url: str) -> None:
    """With jl_audit keyed (job_id, position) a lookup by position alone still walks an
    index in each partition, and the idempotency lookup its (per-partition unique) index."""
    make_month_jobs(pg_url)
    with psycopg.connect(pg_url) as conn:
        conn.execute("SET enable_seqscan = off")  # the tables are tiny: is an index usable?
        by_position = "\n".join(
            str(r[0])
            for r in conn.execute(
                "EXPLAIN SELECT position FROM jl_audit WHERE position = ANY(ARRAY[1, 2]::bigint[])"
            )
        )
        by_key = "\n".join(
            str(r[0])
            for r in conn.execute(
                "EXPLAIN SELECT job_id FROM jl_queue WHERE job_type = 't' "
                "AND coalesce(org, '') = '' AND idempotency_key = 'k'"
            )
        )
    assert "Seq Scan" not in by_position and "Index" in by_position
    assert "Seq Scan" not in by_key and "Index" in by_key
    uniques = _rows(
        pg_url,
        "SELECT c.relname AS partition FROM pg_index x JOIN pg_class c ON c.oid = x.indrelid "
        "JOIN pg_inherits i ON i.inhrelid = c.oid WHERE i.inhparent = 'jl_queue'::regclass "
        "AND x.indisunique AND pg_get_indexdef(x.indexrelid) LIKE '%%idempotency_key%%'",
    )
    assert {"jl_queue_default", "jl_queue_p202001"} <= {r["partition"] for r in uniques}


def test_view_tables_made_before_they_were_partitioned_still_move_by_copy(
    empty_pg_url: str,
) -> None:
    """A database whose events table is partitioned but whose view tables are plain (made
    by the release between the two) keeps them plain through ``init``; a run moves January
    by copying its view rows to jl_archive and deleting them, and verify holds."""
    with psycopg.connect(empty_pg_url) as conn, conn.cursor(row_factory=dict_row) as cur:
        partitions.create_partitioned_events(cur)
    ok(empty_pg_url, "init")
    for table in VIEW_TABLES:
        kind_of = "SELECT relkind FROM pg_class WHERE oid = %(t)s::regclass"
        assert _rows(empty_pg_url, kind_of, {"t": table})[0]["relkind"] == "r"
    jobs = make_month_jobs(empty_pg_url, views_partitioned=False)
    before = {job_id: reads_of(empty_pg_url, job_id) for job_id in jobs.finished}
    _set_rules(empty_pg_url)

    run = json.loads(ok(empty_pg_url, "retention", "run", "--json"))

    assert run["moved"] == 3 and run["rows"]["jl_queue"] == 3
    moved = [str(job_id) for job_id in jobs.finished]
    assert _hot_rows_of(empty_pg_url, moved) == dict.fromkeys(VIEW_TABLES, 0)
    for job_id in jobs.finished:
        assert reads_of(empty_pg_url, job_id) == before[job_id]
    _verified(empty_pg_url)
