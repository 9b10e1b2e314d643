"""``jobledger queue``: pause, resume and list the named queues.

A pause is a ``queue_paused`` event in the queue's own stream (a resume a ``queue_resumed``),
naming who and why; a paused queue's pending jobs stay pending and are not claimed, its leased
ones finish. ``list`` shows every queue with live jobs or a pause history.
"""

from __future__ import annotations

import click

from .database import Settings, open_ledger
from .read_target import open_reader
from .render import MISSING, echo_json, echo_line, json_option, table, when
from ledger.api.shaping import plain
from ledger.core.queue_pauses import QueueState

_ACTOR = "cli"
"""Who the events name: the CLI has no token, so the command line itself."""


@click.group()
def queue() -> None:
    """Pause, resume and list the named queues."""


def _set(settings: Settings, name: str, paused: bool, reason: str, as_json: bool) -> None:
    with open_ledger(settings.url) as ledger:
        before = next((q for q in ledger.limits.queues() if q.queue == name), None)
        was_paused = before is not None and before.paused
        if paused:
            state = ledger.limits.pause_queue(name, reason=reason, actor=_ACTOR)
        else:
            state = ledger.limits.resume_queue(name, reason=reason, actor=_ACTOR)
    change = "unchanged" if was_paused == paused else "paused" if paused else "resumed"
    if as_json:
        echo_json({"queue": name, "change": change, "paused": paused, **_state(state)})
    else:
        echo_line(f"{change} queue {name}")


def _state(state: QueueState | None) -> dict[str, object]:
    if state is None:
        return {"changed_at": None, "actor": None, "reason": None}
    shaped = plain(state)
    return {key: shaped[key] for key in ("changed_at", "actor", "reason")}


@queue.command()
@click.argument("name")
@click.option("--reason", default="paused", show_default=True, help="Why, for the history.")
@json_option
@click.pass_obj
def pause(settings: Settings, *, name: str, reason: str, as_json: bool) -> None:
    """Stop claiming queue NAME's jobs (they stay pending; leased ones finish)."""
    _set(settings, name, True, reason, as_json)


@queue.command()
@click.argument("name")
@click.option("--reason", default="resumed", show_default=True, help="Why, for the history.")
@json_option
@click.pass_obj
def resume(settings: Settings, *, name: str, reason: str, as_json: bool) -> None:
    """Claim queue NAME's jobs again."""
    _set(settings, name, False, reason, as_json)


@queue.command(name="list")
@json_option
@click.pass_obj
def list_(settings: Settings, *, as_json: bool) -> None:
    """List the queues with live jobs or a pause history: counts and paused state."""
    with open_reader(settings) as source:
        found = source.reader.limits.queues()
    if as_json:
        echo_json([plain(summary) for summary in found])
        return
    if not found:
        click.echo("no queues with live jobs or a pause history")
        return
    rows = [
        [
            q.queue,
            "paused" if q.paused else "running",
            str(q.pending),
            str(q.leased),
            when(q.changed_at),
            q.actor or MISSING,
            q.reason or MISSING,
        ]
        for q in found
    ]
    headers = ["QUEUE", "STATE", "PENDING", "LEASED", "CHANGED", "BY", "REASON"]
    click.echo(table(headers, rows))
