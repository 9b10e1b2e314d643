"""A projection table that went missing is recreated *and rebuilt* by ``init`` and ``migrate``."""

from __future__ import annotations

import pytest
from click.testing import CliRunner, Result
from projection_helpers import populate, raw

from jobledger_cli.main import cli
from ledger import Ledger

VIEW_COMMANDS = {
    # table dropped -> the command whose output shows that view's rows
    "jl_queue": ("jobs", "--limit", "100"),
    "jl_definitions": ("definitions",),
    "jl_sync_state": ("sync-state", "src"),
    "jl_dead_letters": ("dlq",),
    "jl_audit": ("audit", "--all", "--format", "jsonl"),
    # the tracked views' positions live here: lost, the audit view would replay from zero
    "jl_tracking": ("audit", "--all", "--format", "jsonl"),
}


def jobledger(url: str, *args: str) -> Result:
    result = CliRunner().invoke(cli, ["--db", url, *args])
    assert result.exit_code == 0, (args, result.stdout, result.stderr, result.exception)
    return result


@pytest.mark.parametrize("command", ["init", "migrate"])
def test_a_dropped_view_table_is_rebuilt_from_history(db_url: str, command: str) -> None:
    """Each view table dropped in turn: the command recreates it, rebuilds it from the history
    in the same run and says so; then verify is clean and the view shows what it showed."""
    populate(db_url)
    with Ledger.open(db_url) as ledger:
        ledger.catch_up()
    shown = {table: jobledger(db_url, *args).stdout for table, args in VIEW_COMMANDS.items()}
    assert "no dead jobs" not in shown["jl_dead_letters"]

    for table, args in VIEW_COMMANDS.items():
        raw(db_url, f"DROP TABLE {table}")
        out = jobledger(db_url, command).stdout
        assert f"created {table}" in out, out
        assert "rebuilt " in out and "from the history" in out, out
        with Ledger.open(db_url) as ledger:
            report = ledger.projections().verify()
        assert report.clean, (table, [v for v in report.views if not v.clean])
        assert jobledger(db_url, *args).stdout == shown[table], table


def test_migrate_dry_run_names_the_rebuild_of_a_missing_view(db_url: str) -> None:
    """--dry-run says the missing table would be created and its view rebuilt, and does
    neither."""
    populate(db_url)
    raw(db_url, "DROP TABLE jl_dead_letters")
    out = jobledger(db_url, "migrate", "--dry-run").stdout
    assert out.splitlines() == [
        "would create jl_dead_letters",
        "would rebuild dead_letters from the history (table jl_dead_letters is missing)",
    ]
    result = CliRunner().invoke(cli, ["--db", db_url, "dlq"])
    assert result.exit_code == 1  # still missing: the dry run changed nothing


def test_migrate_adds_the_workflow_tables_to_a_database_from_before_them(db_url: str) -> None:
    """A database whose release had no workflow view (both tables missing) under a history
    that has a run: migrate creates them and refills them from the history; verify is clean
    and the run reads as before."""
    with Ledger.open(db_url) as ledger:
        ledger.define("work")
        run = ledger.workflows.submit(
            {
                "workflow_type": "etl",
                "steps": [
                    {"kind": "job", "key": "a", "job_type": "work"},
                    {"kind": "external", "key": "gate", "depends_on": [{"step": "a"}]},
                ],
            }
        ).run_id
        before = ledger.workflows.handle(run).steps()
    raw(db_url, "DROP TABLE jl_workflow_steps")
    raw(db_url, "DROP TABLE jl_workflow_runs")
    with pytest.raises(Exception, match="jl_workflow"):
        Ledger.open(db_url).close()
    out = jobledger(db_url, "migrate").stdout
    assert "created jl_workflow_runs" in out and "created jl_workflow_steps" in out, out
    with Ledger.open(db_url) as ledger:
        assert ledger.projections().verify().clean
        assert ledger.workflows.handle(run).steps() == before
