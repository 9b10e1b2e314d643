"""``jobledger serve``: the HTTP control plane over the ledger of ``--db`` (docs/http.md)."""

from __future__ import annotations

import click

from cli.database import Settings, open_ledger
from ledger.http.server import DEFAULT_HOST, DEFAULT_PORT, check_binding
from ledger.http.server import serve as run


@click.command()
@click.option("--host", default=DEFAULT_HOST, show_default=True, help="The address to bind.")
@click.option("--port", type=click.IntRange(0, 65535), default=DEFAULT_PORT, show_default=True)
@click.pass_obj
def serve(settings: Settings, *, host: str, port: int) -> None:
    """Serve the JSON API (/api/v1, OpenAPI at /api/v1/schema/openapi.json) and /health.

    Without a token configured only a loopback --host is accepted.
    """
    check_binding(host, tokens_configured=False)
    with open_ledger(settings.url) as ledger:
        click.echo(f"serving {settings.url} on http://{host}:{port}", err=True)
        run(ledger, host, port)
