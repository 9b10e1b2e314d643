"""The ``jobledger`` group imports a command's module only when that command is asked for."""

from __future__ import annotations

import subprocess
import sys

import click

from jobledger_cli.main import COMMANDS, cli


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
    probe = (
        "import sys, click\n"
        "from jobledger_cli.main import cli\n"
        "cli.get_command(click.Context(cli), 'audit')\n"
        "heavy = ('ledger.runtime.pool', 'jobledger_cli.bench', 'jobledger_cli.worker',\n"
        "         'asyncio.base_events')\n"
        "print(','.join(m for m in heavy if m in sys.modules))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == ""
