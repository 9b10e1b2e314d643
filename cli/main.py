"""The ``jobledger`` group: the global ``--db`` and ``--read-db`` options, the commands, the
error boundary."""

from __future__ import annotations

import importlib
from typing import Any

import click

from .database import Settings
from .errors import one_line_errors
from ledger.store.config import (
    DEFAULT_DATABASE,
    ENV_VAR,
    READ_ENV_VAR,
    resolve_read_url,
    resolve_url,
)

COMMANDS: dict[str, str] = {
    "init": ".database:init",
    "migrate": ".database:migrate",
    "define": ".job_types:define",
    "enable": ".job_types:enable",
    "disable": ".job_types:disable",
    "definitions": ".job_types:definitions",
    "enqueue": ".enqueue:enqueue",
    "cancel": ".cancel:cancel",
    "show": ".show:show",
    "history": ".history:history",
    "jobs": ".job_list:jobs",
    "reap": ".reaper:reap",
    "diagnose": ".diagnose:diagnose",
    "sync-state": ".sync:sync_state",
    "sources": ".sources:sources",
    "dlq": ".dlq:dlq",
    "worker": ".worker:worker",
    "demo": ".demo:demo",
    "bench": ".bench:bench",
    "projections": ".projections:projections",
    "stats": ".stats:stats",
    "audit": ".audit:audit",
    "replay": ".replay:replay",
    "timeline": ".timeline:timeline",
    "export": ".exchange:export",
    "import": ".exchange:import_",
    "workflow": ".workflow:workflow",
    "serve": ".serve:serve",
    "token": ".token:token",
    "pools": ".pools:pools",
    "retention": ".retention:retention",
    "schedule": ".schedule:schedule",
    "queue": ".queues:queue",
}
"""Each command's ``module:attribute`` (relative to this package, whose installed name is
``jobledger_cli``: see docs/architecture.md), imported only when that command runs (or ``--help``
lists them all): importing every command module took ~0.4 s of a ~0.6 s ``jobledger audit``,
most of it in modules that command never uses (the worker pool, the bench, asyncio)."""


class LedgerGroup(click.Group):
    """A group whose failures, and its commands', print as one ``error:`` line, and whose
    commands (:data:`COMMANDS`) are imported when first asked for (click's lazy-group pattern).

    Parsing the group's and a command's arguments happens in ``make_context`` and ``invoke``
    respectively, and the command runs in ``invoke``: wrapping both covers every failure.
    """

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*COMMANDS, *super().list_commands(ctx)})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in COMMANDS:
            return super().get_command(ctx, cmd_name)
        module, attribute = COMMANDS[cmd_name].split(":")
        command = getattr(importlib.import_module(module, __package__), attribute)
        if not isinstance(command, click.Command):
            raise TypeError(f"{COMMANDS[cmd_name]} is not a click command")
        return command

    def make_context(
        self,
        info_name: str | None,
        args: list[str],
        parent: click.Context | None = None,
        **extra: Any,
    ) -> click.Context:
        with one_line_errors():
            return super().make_context(info_name, args, parent, **extra)

    def invoke(self, ctx: click.Context) -> Any:
        with one_line_errors():
            return super().invoke(ctx)


@click.group(
    name="jobledger", cls=LedgerGroup, context_settings={"help_option_names": ["-h", "--help"]}
)
@click.option(
    "--db",
    metavar="URL",
    help=(
        "postgresql://user@host:port/dbname, sqlite:///path.db or a file path  "
        f"[default: ${ENV_VAR}, else {DEFAULT_DATABASE}]"
    ),
)
@click.option(
    "--read-db",
    metavar="URL",
    help=(
        "a PostgreSQL streaming replica of --db for the commands that only read "
        f"(audit, jobs, show, history, stats, export…)  [default: ${READ_ENV_VAR}, else --db]"
    ),
)
@click.version_option(package_name="jobledger")
@click.pass_context
def cli(ctx: click.Context, db: str | None, read_db: str | None) -> None:
    """jobledger: an event-sourced job queue on SQLite or PostgreSQL.

    Exit codes: 0 done, 1 the ledger or database refused, 2 bad command line.
    """
    ctx.obj = Settings(url=resolve_url(db), read_url=resolve_read_url(read_db))


def main() -> None:
    """The console script's entry point."""
    cli(prog_name="jobledger")


if __name__ == "__main__":  # `python -m jobledger_cli.main …` runs it as the console script does
    main()
