"""The ``jobledger`` group imports a command's module only when that command is asked for."""

from __future__ import annotations

import click
import pytest
from fresh_interpreter import probe

from jobledger_cli.main import COMMANDS, cli
from ledger import Ledger


def test_every_listed_command_resolves_to_itself() -> None:
    """Each name in ``COMMANDS`` resolves to a click command of that name, and ``--help``
    lists exactly those names."""
    ctx = click.Context(cli)
    for name in COMMANDS:
        command = cli.get_command(ctx, name)
        assert command is not None and command.name == name
    assert cli.list_commands(ctx) == sorted(COMMANDS)


def test_running_audit_does_not_import_the_worker_runtime() -> None:
    """A fresh interpreter that resolves ``audit`` has not loaded the worker pool, asyncio's
    event loop or the bench (their import was most of a short command's start-up)."""
    loaded = probe(
        "import click\n"
        "from jobledger_cli.main import cli\n"
        "cli.get_command(click.Context(cli), 'audit')\n",
        [
            "ledger.runtime.pool",
            "jobledger_cli.bench",
            "jobledger_cli.worker",
            "asyncio.base_events",
        ],
    ).loaded
    assert loaded == []


@pytest.mark.parametrize("command", ["show", "history", "jobs", "stats"])
def test_read_commands_load_neither_the_write_path_nor_the_views_catalogue(
    sqlite_url: str, command: str
) -> None:
    """A read command runs in a fresh interpreter without importing what only writes,
    rebuilds or hashes (units of work, the workflow policy, the catalogue of every view and
    the rebuilder, OpenSSL, importlib.resources): those imports were most of its start-up
    (issue 17, part 10; bench/bench_cli_latency.py times it). ``stats`` catches the audit view
    up, through the audit view's own module."""
    with Ledger.open(sqlite_url) as ledger:
        ledger.define("cli.probe", max_attempts=1)
        job_id = ledger.enqueue("cli.probe", {"n": 1}).job_id
    args = [command, str(job_id)] if command in ("show", "history") else [command]
    ran = probe(
        "from jobledger_cli.main import cli\n"
        f"cli.main(['--db', {sqlite_url!r}, *{args!r}], standalone_mode=False)\n",
        [
            "ledger.store.unit_of_work",
            "ledger.store.sqlite.unit_of_work",
            "ledger.core.workflows.policy",
            "ledger.views.catalog",
            "ledger.views.registry",
            "projections.rebuilder",
            "_hashlib",
            "importlib.resources",
        ],
    )
    assert ran.loaded == []
    expected = {"show": str(job_id), "history": "job_enqueued", "jobs": str(job_id)}
    assert expected.get(command, "pending") in ran.stdout  # stats counts it pending
