"""The ``jobledger`` group: the global ``--db`` and ``--read-db`` options, the commands, the
error boundary."""

from __future__ import annotations

from typing import Any

import click

from cli import (
    audit,
    bench,
    cancel,
    database,
    demo,
    diagnose,
    dlq,
    enqueue,
    exchange,
    history,
    job_list,
    job_types,
    projections,
    reaper,
    replay,
    show,
    stats,
    sync,
    timeline,
    worker,
)
from cli.database import Settings
from cli.errors import one_line_errors
from ledger.store.config import (
    DEFAULT_DATABASE,
    ENV_VAR,
    READ_ENV_VAR,
    resolve_read_url,
    resolve_url,
)


class LedgerGroup(click.Group):
    """A group whose failures, and its commands', print as one ``error:`` line.

    Parsing the group's and a command's arguments happens in ``make_context`` and ``invoke``
    respectively, and the command runs in ``invoke``: wrapping both covers every failure.
    """

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


for command in (
    database.init,
    database.migrate,
    job_types.define,
    job_types.enable,
    job_types.disable,
    job_types.definitions,
    enqueue.enqueue,
    cancel.cancel,
    show.show,
    history.history,
    job_list.jobs,
    reaper.reap,
    diagnose.diagnose,
    sync.sync_state,
    dlq.dlq,
    worker.worker,
    demo.demo,
    bench.bench,
    projections.projections,
    stats.stats,
    audit.audit,
    replay.replay,
    timeline.timeline,
    exchange.export,
    exchange.import_,
):
    cli.add_command(command)


def main() -> None:
    """The console script's entry point."""
    cli(prog_name="jobledger")


if __name__ == "__main__":  # `python -m cli.main …` runs the CLI as the console script does
    main()
