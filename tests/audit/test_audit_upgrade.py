"""A database whose audit view was built by schema version 1 (no ``code`` column, indexes on
``(column, at)``): ``jobledger init`` rebuilds it, and audit queries by code then work; one
built by version 2 (job events only, no ``workflow_run`` / ``step_key``): ``jobledger
migrate`` rebuilds it, and ``audit --workflow`` then finds the run's rows."""

from __future__ import annotations

import json
import sqlite3
from contextlib import closing
from typing import Any

import psycopg
from audit_helpers import build
from click.testing import CliRunner

from jobledger_cli.main import cli
from ledger import AuditQuery, Ledger
from ledger.views.catalog import AUDIT, version_key

V1_TABLE = """CREATE TABLE jl_audit (
    position bigint PRIMARY KEY,
    job_id {id_type} NOT NULL,
    job_type text NOT NULL,
    org text,
    event text NOT NULL,
    worker_id text,
    run_number integer,
    attempt integer,
    at bigint NOT NULL
)"""
V1_INDEXES = [
    "CREATE INDEX jl_audit_type_idx ON jl_audit (job_type, at)",
    "CREATE INDEX jl_audit_org_idx ON jl_audit (org, at)",
    "CREATE INDEX jl_audit_event_idx ON jl_audit (event, at)",
    "CREATE INDEX jl_audit_worker_idx ON jl_audit (worker_id, at)",
    "CREATE INDEX jl_audit_job_idx ON jl_audit (job_id, position)",
]
V1_COLUMNS = "position, job_id, job_type, org, event, worker_id, run_number, attempt, at"


def run_sql(url: str, statements: list[str]) -> list[Any]:
    """Run statements in one transaction outside the ledger; the last one's rows."""
    rows: list[Any] = []
    if url.startswith("postgresql"):
        with psycopg.connect(url) as conn:
            for statement in statements:
                cursor = conn.execute(statement.encode())
                rows = cursor.fetchall() if cursor.description else []
        return rows
    with closing(sqlite3.connect(url.removeprefix("sqlite:///"))) as conn:
        for statement in statements:
            rows = conn.execute(statement).fetchall()
        conn.commit()
    return rows


def downgrade_audit_to_v1(url: str) -> None:
    """Rebuild ``jl_audit`` in the version-1 shape with the same rows, and record version 1."""
    id_type = "uuid" if url.startswith("postgresql") else "text"
    run_sql(
        url,
        [
            "ALTER TABLE jl_audit RENAME TO jl_audit_v2",
            V1_TABLE.format(id_type=id_type),
            f"INSERT INTO jl_audit ({V1_COLUMNS}) SELECT {V1_COLUMNS} FROM jl_audit_v2",
            "DROP TABLE jl_audit_v2",
            *V1_INDEXES,
            f"UPDATE jl_meta SET value = '1' WHERE key = '{version_key('audit')}'",
        ],
    )


def audit_columns(url: str) -> list[str]:
    if url.startswith("postgresql"):
        rows = run_sql(
            url,
            [
                "SELECT column_name FROM information_schema.columns"
                " WHERE table_name = 'jl_audit' AND table_schema = current_schema()"
                " ORDER BY ordinal_position"
            ],
        )
    else:
        rows = [(row[1],) for row in run_sql(url, ["PRAGMA table_info(jl_audit)"])]
    return [row[0] for row in rows]


def test_init_rebuilds_a_version_1_audit_view_and_code_queries_work(db_url: str) -> None:
    """Before init, a query by code fails with one ``error:`` line (exit 1); ``jobledger
    init`` rebuilds the stale view with the ``code`` column and the new indexes, records
    version 2, verifies clean, and the same query answers."""
    scenario = build(db_url)
    with Ledger.open(db_url) as ledger:
        ledger.catch_up(["audit"])
    downgrade_audit_to_v1(db_url)
    assert "code" not in audit_columns(db_url)
    runner = CliRunner()
    args = ["--db", db_url, "audit", "--event", "job_retry_scheduled", "--code", "E2", "--json"]

    before = runner.invoke(cli, args)
    assert before.exit_code == 1 and before.stdout == ""
    [line] = before.stderr.splitlines()
    assert line.startswith("error: ")

    init = runner.invoke(cli, ["--db", db_url, "init"])
    assert init.exit_code == 0, init.output
    assert audit_columns(db_url)[-3:] == ["code", "workflow_run", "step_key"]
    recorded = run_sql(db_url, [f"SELECT value FROM jl_meta WHERE key = '{version_key('audit')}'"])
    assert recorded == [(str(AUDIT.version),)] and AUDIT.version == 4

    after = runner.invoke(cli, args)
    assert after.exit_code == 0, after.output
    rows = json.loads(after.stdout)["rows"]
    assert len(rows) == 4 and {r["code"] for r in rows} == {"E2"}
    with Ledger.open(db_url, clock=scenario.clock) as ledger:
        assert ledger.projections().verify(["audit"]).clean
        failures = ledger.audit(AuditQuery(events=("job_failed",), code="E2")).rows
        assert len(failures) == 4  # the rebuilt rows carry the codes the old ones lacked


V2_COLUMNS = f"{V1_COLUMNS}, code"


def downgrade_audit_to_v2(url: str) -> None:
    """Rebuild ``jl_audit`` in the version-2 shape with its job rows only (version 2 had no
    row for a workflow event), and record version 2."""
    id_type = "uuid" if url.startswith("postgresql") else "text"
    v2_table = V1_TABLE.format(id_type=id_type).replace(
        "at bigint NOT NULL", "at bigint NOT NULL,\n    code text"
    )
    run_sql(
        url,
        [
            "ALTER TABLE jl_audit RENAME TO jl_audit_v3",
            "DROP INDEX IF EXISTS jl_audit_workflow_idx",
            *(
                f"DROP INDEX IF EXISTS jl_audit_{name}_idx"
                for name in ("type", "org", "event", "worker", "code", "job")
            ),
            v2_table,
            f"INSERT INTO jl_audit ({V2_COLUMNS}) SELECT {V2_COLUMNS} FROM jl_audit_v3"
            " WHERE event NOT LIKE 'workflow%'",
            "DROP TABLE jl_audit_v3",
            f"UPDATE jl_meta SET value = '2' WHERE key = '{version_key('audit')}'",
        ],
    )


def test_migrate_rebuilds_a_version_2_audit_view_with_the_workflow_rows(db_url: str) -> None:
    """A version-2 audit view has no workflow rows nor columns: ``migrate`` says the view is
    stale, rebuilds it with them, and ``audit --workflow RUN`` then lists the run's own events
    and its step job's; the rebuilt view verifies clean."""
    with Ledger.open(db_url) as ledger:
        ledger.define("work")
        run = ledger.workflows.submit(
            {"workflow_type": "etl", "steps": [{"kind": "job", "key": "a", "job_type": "work"}]}
        ).run_id
        [claimed] = ledger.claim("w1")
        ledger.succeed(claimed.lease, output={"ok": True})
        ledger.catch_up(["audit"])
    downgrade_audit_to_v2(db_url)
    assert "workflow_run" not in audit_columns(db_url)
    runner = CliRunner()
    migrated = runner.invoke(cli, ["--db", db_url, "migrate"])
    assert migrated.exit_code == 0, migrated.output
    assert "audit" in migrated.output
    assert audit_columns(db_url)[-2:] == ["workflow_run", "step_key"]
    listed = runner.invoke(cli, ["--db", db_url, "audit", "--workflow", str(run), "--json"])
    assert listed.exit_code == 0, listed.output
    events = [row["event"] for row in reversed(json.loads(listed.stdout)["rows"])]
    assert events == [
        "workflow_submitted",
        "workflow_step_released",
        "job_enqueued",
        "job_leased",
        "job_succeeded",
        "workflow_step_succeeded",
        "workflow_status_changed",
    ]
    with Ledger.open(db_url) as ledger:
        assert ledger.projections().verify(["audit"]).clean
