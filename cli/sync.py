"""``jobledger sync-state SOURCE``: what the ledger last ingested from one source."""

from __future__ import annotations

import click

from .database import Settings
from .read_target import open_reader
from .render import MISSING, echo_json, echo_line, json_option, table, when
from ledger.api.shaping import plain
from ledger.views.sync_state import SyncState


def _row(row: SyncState) -> list[str]:
    return [
        row.uri,
        row.revision or MISSING,
        row.content_hash or MISSING,
        when(row.last_seen_at),
        when(row.last_ingested_at),
    ]


@click.command(name="sync-state")
@click.argument("source")
@json_option
@click.pass_obj
def sync_state(settings: Settings, *, source: str, as_json: bool) -> None:
    """List the sync state of source SOURCE, one row per URI, sorted by URI.

    Each row is what the last successful upsert job for the URI reported: its revision and
    content hash (a value a later result left out is kept), and when it was ingested.
    """
    with open_reader(settings) as reading:
        rows = reading.reader.sources.sync_state(source)
    if as_json:
        echo_json([plain(row) for row in rows])
    elif not rows:
        echo_line(f"no sync state for source {source!r}")
    else:
        headers = ["URI", "REVISION", "CONTENT HASH", "LAST SEEN", "LAST INGESTED"]
        click.echo(table(headers, [_row(row) for row in rows]))
