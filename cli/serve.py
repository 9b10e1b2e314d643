"""``jobledger serve``: the HTTP control plane over the ledger of ``--db`` (docs/http.md)."""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import quote

import click

from . import params
from .database import Settings, open_ledger
from ledger.api.ledger import Ledger
from ledger.core.errors import InvalidRequestError
from ledger.core.tokens import Role
from ledger.http.event_hub import DEFAULT_POLL_S
from ledger.http.server import DEFAULT_HOST, DEFAULT_PORT, check_binding
from ledger.http.server import serve as run

BOOTSTRAP_LABEL = "bootstrap (serve --token-file)"


def _bootstrap(ledger: Ledger, path: Path) -> tuple[str, bool]:
    """A missing token file gets a new admin token's secret (mode 0600, printed nowhere);
    an existing one must hold an active admin token's. Returns the secret and whether it
    was created now."""
    if not path.exists():
        created = ledger.create_token(org=None, role=Role.ADMIN.value, label=BOOTSTRAP_LABEL)
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "w") as file:
            file.write(created.secret + "\n")
        click.echo(
            f"created admin token {created.token.token_id}; its secret is in {path}", err=True
        )
        return created.secret, True
    secret = path.read_text().strip()
    token = ledger.authenticate(secret)
    if token is None or token.role is not Role.ADMIN:
        raise InvalidRequestError(f"{path} holds no active admin token's secret")
    return secret, False


def login_link(host: str, port: int, secret: str) -> str:
    """The dashboard's login URL with the secret in its fragment (``#token=``): a browser
    never sends a fragment, so the secret stays out of every request line and server log;
    the login page's script posts it. A wildcard bind is linked through loopback."""
    shown = {"0.0.0.0": "127.0.0.1", "::": "::1"}.get(host, host)
    if ":" in shown:
        shown = f"[{shown}]"
    return f"http://{shown}:{port}/login#token={quote(secret, safe='')}"


@click.command()
@click.option("--host", default=DEFAULT_HOST, show_default=True, help="The address to bind.")
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=DEFAULT_PORT,
    show_default=True,
    help="The port to listen on (0: any free one).",
)
@click.option(
    "--token-file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="An admin token's secret; if the file is missing, a new admin token is created and "
    "its secret written there (mode 0600).",
)
@click.option(
    "--print-login-link",
    is_flag=True,
    help="Print the dashboard's login link for the --token-file token (printed anyway when "
    "serve creates the token).",
)
@click.option(
    "--stream-poll",
    "stream_poll_s",
    type=params.Seconds(0.01),
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
    print_login_link: bool,
    stream_poll_s: float,
) -> None:
    """Serve the dashboard (/), the JSON API (/api/v1, OpenAPI at
    /api/v1/schema/openapi.json) and /health.

    Every route but /health, /login and the OpenAPI document needs a bearer token (`jobledger
    token create`) or, for the dashboard, a login. While no token is active, only a loopback
    --host is accepted.
    """
    if print_login_link and token_file is None:
        raise click.UsageError("--print-login-link needs --token-file")
    with open_ledger(settings.url) as ledger:
        if token_file is not None:
            secret, created = _bootstrap(ledger, token_file)
            if created or print_login_link:
                click.echo(f"dashboard: {login_link(host, port, secret)}", err=True)
        check_binding(host, tokens_configured=any(t.active for t in ledger.tokens()))
        click.echo(f"serving {settings.url} on http://{host}:{port}", err=True)
        run(ledger, host, port, stream_poll_s=stream_poll_s)
