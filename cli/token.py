"""``jobledger token``: create, list and revoke the HTTP API's tokens (docs/http.md).

Each is an event in the token's own stream; the ledger keeps the secret's SHA-256 only, so
``create`` prints the secret once and nothing can print it again."""

from __future__ import annotations

from uuid import UUID

import click

from .database import Settings, open_ledger
from .read_target import open_reader
from .render import MISSING, echo_json, json_option, table, when
from ledger.api.shaping import token_json
from ledger.core.tokens import ORDER


@click.group()
def token() -> None:
    """Create, list and revoke API tokens."""


@token.command()
@click.option("--org", help="The org it sees and touches (required unless --role admin).")
@click.option(
    "--role",
    type=click.Choice([role.value for role in ORDER]),
    required=True,
    help="read, "
    "operate (also retry, cancel, enqueue, complete steps) or admin (also define; no --org: "
    "every org).",
)
@click.option("--name", "label", help="A label to tell tokens apart.")
@json_option
@click.pass_obj
def create(
    settings: Settings, *, org: str | None, role: str, label: str | None, as_json: bool
) -> None:
    """Create a token and print its secret (shown this once: the ledger keeps its hash)."""
    with open_ledger(settings.url) as ledger:
        created = ledger.tokens.create(org=org, role=role, label=label)
    if as_json:
        echo_json({**token_json(created.token), "secret": created.secret})
        return
    click.echo(created.secret)
    click.echo(f"token {created.token.token_id}: keep the secret above, it is not stored", err=True)


@token.command(name="list")
@json_option
@click.pass_obj
def list_(settings: Settings, *, as_json: bool) -> None:
    """List the tokens (revoked ones too); never a secret."""
    with open_reader(settings) as source:
        tokens = source.reader.tokens.all()
    if as_json:
        echo_json([token_json(t) for t in tokens])
        return
    rows = [
        [
            str(t.token_id),
            t.org or "(all)",
            t.role.value,
            t.label or MISSING,
            when(t.created_at),
            MISSING if t.revoked_at is None else when(t.revoked_at),
        ]
        for t in tokens
    ]
    click.echo(table(["ID", "ORG", "ROLE", "NAME", "CREATED", "REVOKED"], rows))


@token.command()
@click.argument("token_id", metavar="ID", type=click.UUID)
@click.option(
    "--reason",
    default="revoked by operator",
    show_default=True,
    help="Recorded in the revoke event.",
)
@json_option
@click.pass_obj
def revoke(settings: Settings, *, token_id: UUID, reason: str, as_json: bool) -> None:
    """Stop accepting token ID (an event: the token's history keeps it)."""
    with open_ledger(settings.url) as ledger:
        revoked = ledger.tokens.revoke(token_id, reason=reason)
    if as_json:
        echo_json(token_json(revoked))
    else:
        click.echo(f"revoked {token_id}")
