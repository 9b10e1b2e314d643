"""Which database the CLI talks to, how it is named on screen, and ``jobledger init``."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import click

from .errors import redact
from .params import Seconds
from .progress import ProgressBars
from .render import echo_json, json_option
from ledger.store.config import is_postgres, open_store, postgres_params, sqlite_path
from ledger.store.schema import MIGRATION_WAIT_S

# The ledger's API is imported where a command uses it, not here: every command imports this
# module (for Settings), and the API's import is most of a read command's start-up.
if TYPE_CHECKING:
    from ledger.api import migrate as migration
    from ledger.api.ledger import Ledger

# One command is one or two calls on one thread: a single pooled connection is enough, and
# PostgreSQL's pool would otherwise open two before the first query.
POOL_SIZE = 1


@dataclass(frozen=True)
class Settings:
    """What the group's options resolved to, handed to every command as ``ctx.obj``."""

    url: str
    read_url: str | None = None
    """A streaming replica for the commands that only read (``--read-db``); those that
    write always use :attr:`url`."""


def display_url(url: str) -> str:
    """A PostgreSQL URL without its password (in the user part or as a query parameter); a
    libpq ``key=value`` string, or a URL that does not split, with ``password=`` and any
    ``user:password@`` masked."""
    if not url.startswith(("postgresql://", "postgres://")):
        return redact(url)
    try:
        parts = urlsplit(url)
    except ValueError:  # "Invalid IPv6 URL": postgres_params refuses it first, with a reason
        return redact(url)
    netloc = parts.netloc
    if "@" in netloc:
        userinfo, _, hostport = netloc.rpartition("@")
        netloc = f"{userinfo.partition(':')[0]}@{hostport}"
    query = [(k, v) for k, v in parse_qsl(parts.query) if k.lower() != "password"]
    return urlunsplit(parts._replace(netloc=netloc, query=urlencode(query)))


def describe(url: str) -> str:
    """How the database at ``url`` is named in messages: backend and location, no secrets."""
    if is_postgres(url):
        postgres_params(url)  # a malformed URL is config.invalid_url (exit 2), as it is to open
        return f"PostgreSQL database {display_url(url)}"
    return f"SQLite database {Path(sqlite_path(url)).resolve()}"


def open_ledger(url: str, *, auto_define: bool = False) -> Ledger:
    """Open an initialised ledger (a missing SQLite file is refused, not created)."""
    from ledger.api.ledger import Ledger

    return Ledger.open(url, auto_define=auto_define, pool_size=POOL_SIZE)


def _refill_line(refill: migration.Refill) -> str:
    return (
        f"rebuilt {refill.name} from the history (table {refill.table} was missing): "
        f"{refill.rows} rows from {refill.events} events"
    )


_wait_option = click.option(
    "--wait",
    "wait_s",
    type=Seconds(most=86_400),
    default=MIGRATION_WAIT_S,
    show_default=True,
    metavar="SECONDS",
    help="How long to wait for another init or migrate of this database to finish "
    "(0: fail at once). After waiting, this one does only what is left.",
)


@click.command()
@json_option
@_wait_option
@click.pass_obj
def init(settings: Settings, *, as_json: bool, wait_s: float) -> None:
    """Create the ledger's tables in the database. Safe to run again.

    A view whose table had to be created in a ledger with a history is rebuilt from it.
    """
    from ledger.api.opening import open_ready_store
    from ledger.api.shaping import plain

    where = describe(settings.url)
    bars = ProgressBars()
    try:
        opened = open_ready_store(
            settings.url, create=True, pool_size=POOL_SIZE, progress=bars, wait_s=wait_s
        )
    finally:
        bars.close()
    opened.store.close()
    if as_json:
        echo_json(
            {
                "database": where,
                "created": opened.created,
                "created_tables": list(opened.created_tables),
                "refilled": [plain(refill) for refill in opened.refilled],
            }
        )
        return
    for table in opened.created_tables:
        click.echo(f"created {table}")
    for refill in opened.refilled:
        click.echo(_refill_line(refill))
    if opened.created:
        click.echo(f"initialised {where}")
    else:
        click.echo(f"{where} already initialised")


@click.command()
@click.option("--dry-run", is_flag=True, help="Say what would change; change nothing.")
@json_option
@_wait_option
@click.pass_obj
def migrate(settings: Settings, dry_run: bool, as_json: bool, wait_s: float) -> None:
    """Bring an existing ledger up to this code: rebuild stale projections, add missing tables.

    Safe with workers running (rebuilds swap in atomically; table locks are taken within a
    bound and retried, so writers never deadlock with it); safe to run again. One init or
    migrate runs at a time per database: a second waits for the first (--wait), then does
    only what is left, usually nothing.
    """
    from ledger.api import migrate as migration
    from ledger.api.shaping import plain

    store = open_store(settings.url, pool_size=POOL_SIZE)
    try:
        if dry_run:
            planned = migration.plan(store)
            if as_json:
                echo_json(plain(planned))
            elif planned.empty:
                click.echo(f"{describe(settings.url)} is up to date")
            else:
                for line in planned.stale:
                    click.echo(f"would rebuild {line}")
                for table in planned.missing_tables:
                    click.echo(f"would create {table}")
                for column in planned.missing_columns:
                    click.echo(f"would add column {column}")
                for index in planned.missing_indexes:
                    click.echo(f"would create index {index}")
                for view in planned.missing_views:
                    click.echo(
                        f"would rebuild {view.name} from the history "
                        f"(table {view.table} is missing)"
                    )
            return
        bars = ProgressBars()
        try:
            report = migration.migrate(store, progress=None if as_json else bars, wait_s=wait_s)
        finally:
            bars.close()
    finally:
        store.close()
    if as_json:
        echo_json(plain(report))
    elif report.plan.empty:
        click.echo(f"{describe(settings.url)} is up to date")
    else:
        for line in report.plan.stale:
            click.echo(f"rebuilt {line}")
        for table in report.created_tables:
            click.echo(f"created {table}")
        for column in report.plan.missing_columns:
            click.echo(f"added column {column}")
        for index in report.plan.missing_indexes:
            click.echo(f"created index {index}")
        for refill in report.refilled:
            click.echo(_refill_line(refill))
        if report.chain_starts_after is not None:
            where = (
                f"after position {report.chain_starts_after} (the events before it are "
                "outside the chain)"
                if report.chain_starts_after
                else "at the first event"
            )
            click.echo(f"started the history's hash chain {where}: docs/integrity.md")
        click.echo(f"migrated {describe(settings.url)} in {report.seconds:.1f}s")
