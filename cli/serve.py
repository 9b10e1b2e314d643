"""``jobledger serve``: the HTTP control plane over the ledger of ``--db`` (docs/http.md)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from urllib.parse import quote

import click

from . import params
from .database import Settings, describe, open_ledger
from ledger.api.ledger import Ledger
from ledger.core.errors import InvalidRequestError
from ledger.core.tokens import Role, TokenState
from ledger.http.event_hub import DEFAULT_POLL_S
from ledger.http.server import DEFAULT_HOST, DEFAULT_PORT, check_binding
from ledger.http.server import serve as run
from ledger.http.sessions import LOGIN_CODE_S, Sessions

BOOTSTRAP_LABEL = "bootstrap (serve --token-file)"


def _bootstrap(ledger: Ledger, path: Path) -> tuple[TokenState, bool]:
    """A missing token file gets a new admin token's secret (mode 0600, printed nowhere);
    an existing one must hold an active admin token's. Returns the token and whether it
    was created now."""
    if not path.exists():
        created = ledger.tokens.create(org=None, role=Role.ADMIN.value, label=BOOTSTRAP_LABEL)
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "w") as file:
            file.write(created.secret + "\n")
        click.echo(
            f"created admin token {created.token.token_id}; its secret is in {path.resolve()}"
            " (keep that file out of version control and backups others read)",
            err=True,
        )
        _warn_if_in_a_repository(path)
        return created.token, True
    token = ledger.tokens.authenticate(path.read_text().strip())
    if token is None or token.role is not Role.ADMIN:
        raise InvalidRequestError(f"{path} holds no active admin token's secret")
    return token, False


def _warn_if_in_a_repository(path: Path) -> None:
    """Say so when the secret's file sits in a git working tree and git does not ignore
    it, where a ``git add .`` would commit it."""
    resolved = path.resolve()
    tree = next((f for f in resolved.parents if (f / ".git").exists()), None)
    if tree is None:
        return
    git = shutil.which("git")
    if git is not None:
        ignored = subprocess.run(
            [git, "-C", str(tree), "check-ignore", "-q", str(resolved)], check=False
        )
        if ignored.returncode == 0:
            return
    click.echo(
        f"warning: {path} is inside the git working tree {tree} and not ignored: add it to "
        ".gitignore, or keep the token file elsewhere",
        err=True,
    )


def login_link(host: str, port: int, code: str) -> str:
    """The dashboard's login URL with a one-time login code (never the token's secret) in
    its fragment (``#code=``): a browser never sends a fragment, so the code stays out of
    every request line and server log; the login page's script posts it. A wildcard bind is
    linked through loopback."""
    shown = {"0.0.0.0": "127.0.0.1", "::": "::1"}.get(host, host)
    if ":" in shown:
        shown = f"[{shown}]"
    return f"http://{shown}:{port}/login#code={quote(code, safe='')}"


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
    help="Print a one-time login link to the dashboard for the --token-file token (printed "
    "anyway when serve creates the token; good for one login within 10 minutes).",
)
@click.option(
    "--allowed-host",
    "allowed_hosts",
    multiple=True,
    metavar="NAME",
    help="A host name the server answers to (repeatable), besides localhost, the --host "
    "name and IP addresses: any other Host header is refused (DNS rebinding).",
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
    allowed_hosts: tuple[str, ...],
    stream_poll_s: float,
) -> None:
    """Serve the dashboard (/), the JSON API (/api/v1, OpenAPI at
    /api/v1/schema/openapi.json) and /health.

    Every route but /health, /login and the OpenAPI document needs a bearer token (`jobledger
    token create`) or, for the dashboard, a login. While no token is active, only a loopback
    --host is accepted. The secret is never printed: the login link holds a one-time code.
    """
    if print_login_link and token_file is None:
        raise click.UsageError("--print-login-link needs --token-file")
    sessions = Sessions()
    with open_ledger(settings.url) as ledger:
        if token_file is not None:
            token, created = _bootstrap(ledger, token_file)
            if created or print_login_link:
                code = sessions.login_code(token.token_id, ledger.clock.now())
                link = login_link(host, port, code)
                minutes = LOGIN_CODE_S // 60
                click.echo(f"dashboard (one login, within {minutes} minutes): {link}", err=True)
        check_binding(host, tokens_configured=any(t.active for t in ledger.tokens.all()))
        click.echo(f"serving the {describe(settings.url)} on http://{host}:{port}", err=True)
        run(
            ledger,
            host,
            port,
            stream_poll_s=stream_poll_s,
            sessions=sessions,
            allowed_hosts=allowed_hosts,
        )
