"""``jobledger serve``: the HTTP control plane over the ledger of ``--db`` (docs/http.md)."""

from __future__ import annotations

import os
from pathlib import Path

import click

from cli.database import Settings, open_ledger
from ledger.api.ledger import Ledger
from ledger.core.errors import InvalidRequestError
from ledger.core.tokens import Role
from ledger.http.event_hub import DEFAULT_POLL_S
from ledger.http.server import DEFAULT_HOST, DEFAULT_PORT, check_binding
from ledger.http.server import serve as run

BOOTSTRAP_LABEL = "bootstrap (serve --token-file)"


def _bootstrap(ledger: Ledger, path: Path) -> None:
    """A missing token file gets a new admin token's secret (mode 0600, printed nowhere);
    an existing one must hold an active admin token's."""
    if not path.exists():
        created = ledger.create_token(org=None, role=Role.ADMIN.value, label=BOOTSTRAP_LABEL)
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "w") as file:
            file.write(created.secret + "\n")
        click.echo(
            f"created admin token {created.token.token_id}; its secret is in {path}", err=True
        )
        return
    token = ledger.authenticate(path.read_text().strip())
    if token is None or token.role is not Role.ADMIN:
        raise InvalidRequestError(f"{path} holds no active admin token's secret")


@click.command()
@click.option("--host", default=DEFAULT_HOST, show_default=True, help="The address to bind.")
@click.option("--port", type=click.IntRange(0, 65535), default=DEFAULT_PORT, show_default=True)
@click.option(
    "--token-file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="An admin token's secret; if the file is missing, a new admin token is created and "
    "its secret written there (mode 0600).",
)
@click.option(
    "--stream-poll",
    "stream_poll_s",
    type=click.FloatRange(min=0.01),
    default=DEFAULT_POLL_S,
    show_default=True,
    help="Seconds between the event stream's reads of the log when nothing wakes it (on "
    "SQLite its only way to see other processes' commits).",
)
@click.pass_obj
def serve(
    settings: Settings,
    *,
    host: str,
    port: int,
    token_file: Path | None,
    stream_poll_s: float,
) -> None:
    """Serve the JSON API (/api/v1, OpenAPI at /api/v1/schema/openapi.json) and /health.

    Every route but /health and the OpenAPI document needs a bearer token (`jobledger
    token create`). While no token is active, only a loopback --host is accepted.
    """
    with open_ledger(settings.url) as ledger:
        if token_file is not None:
            _bootstrap(ledger, token_file)
        check_binding(host, tokens_configured=any(t.active for t in ledger.tokens()))
        click.echo(f"serving {settings.url} on http://{host}:{port}", err=True)
        run(ledger, host, port, stream_poll_s=stream_poll_s)
