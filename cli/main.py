"""The ``jobledger`` group: the global ``--db`` and ``--read-db`` options, the commands, the
error boundary."""

from __future__ import annotations

import importlib
import os
from typing import Any, NamedTuple

import click

from .errors import one_line_errors
from .text_args import require_utf8
from ledger.store.config import (
    DEFAULT_DATABASE,
    ENV_VAR,
    READ_ENV_VAR,
    resolve_read_url,
    resolve_url,
)


class Entry(NamedTuple):
    """A command in the group's table: where it lives, and its line in ``jobledger --help``."""

    target: str
    """``module:attribute``, relative to this package (installed as ``jobledger_cli``: see
    docs/architecture.md)."""
    summary: str
    """Its line in ``jobledger --help`` (its own ``--help`` says the rest)."""


SECTIONS: dict[str, dict[str, Entry]] = {
    "Set up": {
        "init": Entry(".database:init", "Create the ledger's tables"),
        "migrate": Entry(".database:migrate", "Bring a ledger up to this code"),
        "define": Entry(".job_types:define", "Define or replace a job type"),
        "enable": Entry(".job_types:enable", "Accept new jobs of a type again"),
        "disable": Entry(".job_types:disable", "Refuse new jobs of a type"),
        "definitions": Entry(".job_types:definitions", "List the job types"),
        "queue": Entry(".queues:queue", "Pause, resume and list the named queues"),
        "schedule": Entry(".schedule:schedule", "Cron schedules that enqueue jobs"),
        "token": Entry(".token:token", "Create, list and revoke API tokens"),
    },
    "Enqueue and act on jobs": {
        "enqueue": Entry(".enqueue:enqueue", "Enqueue one job"),
        "cancel": Entry(".cancel:cancel", "Cancel pending or leased jobs"),
        "dlq": Entry(".dlq:dlq", "The dead jobs: list them, requeue them"),
        "workflow": Entry(".workflow:workflow", "Workflow runs: start, complete, cancel, show"),
        "reap": Entry(".reaper:reap", "Release the expired leases once"),
        "retention": Entry(".retention:retention", "Move finished jobs to the archive"),
    },
    "Inspect": {
        "show": Entry(".show:show", "A job's state, and why it is not running"),
        "history": Entry(".history:history", "A job's events, oldest first"),
        "timeline": Entry(".timeline:timeline", "A job's events with the change each made"),
        "diagnose": Entry(".diagnose:diagnose", "Findings from a job's history"),
        "jobs": Entry(".job_list:jobs", "List jobs, now or at a past time"),
        "stats": Entry(".stats:stats", "Counts, throughput, run times, what holds jobs back"),
        "audit": Entry(".audit:audit", "Search every event ever recorded"),
        "pools": Entry(".pools:pools", "The worker pools' reports and health"),
        "sources": Entry(".sources:sources", "Each source's sync state, jobs and last poll"),
        "sync-state": Entry(".sync:sync_state", "One source's sync state, by URI"),
    },
    "Run": {
        "worker": Entry(".worker:worker", "Run workers for your handlers"),
        "serve": Entry(".serve:serve", "Serve the dashboard and the HTTP API"),
        "demo": Entry(".demo:demo", "Enqueue a realistic mix and work it"),
        "bench": Entry(".bench:bench", "Measure this database"),
    },
    "Check and move history": {
        "projections": Entry(".projections:projections", "Rebuild, verify and inspect the views"),
        "replay": Entry(".replay:replay", "Replay a job: its state then, its decisions"),
        "export": Entry(".exchange:export", "Write job histories as JSON Lines"),
        "import": Entry(".exchange:import_", "Load an export into a ledger"),
        "integrity": Entry(".integrity:integrity", "The history's hash chain: head, verify"),
    },
}
"""The commands by task, as ``jobledger --help`` lists them."""

COMMANDS: dict[str, str] = {
    name: entry.target for section in SECTIONS.values() for name, entry in section.items()
}
"""Each command's ``module:attribute``, imported only when that command runs: importing every
command module took ~0.4 s of a ~0.6 s ``jobledger audit``, most of it in modules that command
never uses (the worker pool, the bench, asyncio). ``jobledger --help`` lists them from
:data:`SECTIONS` without importing any."""


class LedgerGroup(click.Group):
    """A group whose failures, and its commands', print as one ``error:`` line, whose
    commands (:data:`COMMANDS`) are imported when first asked for (click's lazy-group pattern),
    and whose help lists them by task (:data:`SECTIONS`) without importing them.

    Parsing the group's and a command's arguments happens in ``make_context`` and ``invoke``
    respectively, and the command runs in ``invoke``: wrapping both covers every failure.
    """

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*COMMANDS, *super().list_commands(ctx)})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in COMMANDS:
            command = super().get_command(ctx, cmd_name)
            return None if command is None else require_utf8(command)
        module, attribute = COMMANDS[cmd_name].split(":")
        command = getattr(importlib.import_module(module, __package__), attribute)
        if not isinstance(command, click.Command):
            raise TypeError(f"{COMMANDS[cmd_name]} is not a click command")
        # Every string the command takes is checked as UTF-8 while it is parsed (a usage
        # error), never sent to the database as a lone surrogate: see text_args.
        return require_utf8(command)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        width = max(len(name) for name in COMMANDS)  # one column for every section
        for title, entries in SECTIONS.items():
            with formatter.section(title):
                formatter.write_dl([(n.ljust(width), e.summary) for n, e in entries.items()])
        others = [name for name in super().list_commands(ctx) if name not in COMMANDS]
        if others:  # a command added with add_command (an application's own)
            with formatter.section("Other commands"):
                rows = []
                for name in others:
                    command = super().get_command(ctx, name)
                    rows.append((name, command.get_short_help_str() if command else ""))
                formatter.write_dl(rows)

    def make_context(
        self,
        info_name: str | None,
        args: list[str],
        parent: click.Context | None = None,
        **extra: Any,
    ) -> click.Context:
        with one_line_errors():
            ctx = super().make_context(info_name, args, parent, **extra)
        if os.environ.get("NO_COLOR"):  # https://no-color.org: set and not empty
            ctx.color = False
        return ctx

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
    from .database import Settings  # not for --help: it loads the ledger's API

    # --db and --read-db keep their bytes, as $JOBLEDGER_DB does: a SQLite file's name need
    # not be UTF-8; a PostgreSQL URL that is not is refused where it is parsed.
    ctx.obj = Settings(url=resolve_url(db), read_url=resolve_read_url(read_db))


def main() -> None:
    """The console script's entry point."""
    cli(prog_name="jobledger")


if __name__ == "__main__":  # `python -m jobledger_cli.main …` runs it as the console script does
    main()
