"""``jobledger pools``: the worker pools' reports of themselves and the health judged from them."""

from __future__ import annotations

import click

from .database import Settings
from .read_target import open_reader
from .render import echo_json, json_option, table, when
from ledger.api.pools import LedgerHealth
from ledger.api.shaping import ledger_health_json


def _text(health: LedgerHealth) -> str:
    rows = [
        [
            pool.report.pool_id,
            "stale" if pool.stale else pool.report.status,
            f"{pool.report.in_flight}/{pool.report.concurrency}",
            f"{(health.at - pool.report.last_seen_at).total_seconds():.1f}s ago",
            when(pool.report.started_at),
            pool.report.version,
            "; ".join(pool.report.reasons),
        ]
        for pool in health.pools
    ]
    lines = []
    if rows:
        headers = ["POOL", "STATUS", "IN FLIGHT", "LAST SEEN", "STARTED", "VERSION", "REASONS"]
        lines.append(table(headers, rows))
        lines.append("")
    lines.append(f"health: {health.status}")
    lines.extend(f"  {reason}" for reason in health.reasons)
    return "\n".join(lines)


@click.command()
@json_option
@click.pass_obj
def pools(settings: Settings, as_json: bool) -> None:
    """The worker pools' latest reports (stale: silent past three report intervals, counted
    dead) and the health judged from them (degraded: no live pool, a stale pool, a pool
    reporting itself degraded)."""
    with open_reader(settings) as source:
        health = source.reader.health()
    if as_json:
        echo_json(source.tagged(ledger_health_json(health)))
    else:
        click.echo(_text(health))
