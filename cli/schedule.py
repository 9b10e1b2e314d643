"""``jobledger schedule``: add, list, show, pause, resume and remove cron schedules
(docs/schedules.md).

Each change is an event in the schedule's own stream; the workers' scheduler service fires
the slots (``worker --scheduler-interval``). A bad cron expression or time zone is a usage
error (exit 2), refused before the ledger is opened.
"""

from __future__ import annotations

from collections.abc import Callable

import click

from . import params
from .database import Settings, open_ledger
from .read_target import open_reader
from .render import (
    MISSING,
    compact_json,
    echo_json,
    echo_line,
    fields,
    json_option,
    scalar,
    table,
    when,
)
from ledger.core.schedules.errors import ScheduleNotFoundError
from ledger.core.schedules.events import CatchUp
from ledger.core.schedules.slots import InvalidCronError, UnknownTimeZoneError, check_cron, zone
from ledger.core.schedules.state import ScheduleState
from ledger.core.values import JSON
from ledger.schedules.schedule_reads import (
    MissedSlotsView,
    ScheduleDetail,
    schedule_detail,
    schedule_detail_json,
    schedule_json,
)
from ledger.views.kinds import SCHEDULES
from ledger.views.schedules import upcoming


def _cron(ctx: click.Context, param: click.Parameter, value: str) -> str:
    try:
        check_cron(value)
    except InvalidCronError as error:
        raise click.BadParameter(error.message) from None
    return value


def _tz(ctx: click.Context, param: click.Parameter, value: str) -> str:
    try:
        zone(value)
    except UnknownTimeZoneError as error:
        raise click.BadParameter(error.message) from None
    return value


@click.group()
def schedule() -> None:
    """Cron schedules: each slot enqueues one job, exactly once."""


@schedule.command()
@click.argument("name")
@click.option("--cron", required=True, callback=_cron, help='A cron expression: "*/5 * * * *".')
@click.option("--type", "job_type", required=True, help="The job type each slot enqueues.")
@click.option(
    "--payload", default="{}", callback=params.payload, help="Each job's payload (JSON object)."
)
@click.option(
    "--tz", default="UTC", show_default=True, callback=_tz, help="The zone cron is read in."
)
@click.option(
    "--catch-up",
    type=click.Choice([policy.value for policy in CatchUp]),
    default=CatchUp.LATEST.value,
    show_default=True,
    help="Slots overdue after downtime: fire all, fire the latest, or none (missed).",
)
@click.option(
    "--jitter",
    type=params.Seconds(),
    default=0.0,
    show_default=True,
    metavar="SECONDS",
    help="Delay each job's run_at by up to this (the same for a slot in every process).",
)
@click.option("--org", help="Each job's org.")
@click.option("--queue", help="Each job's queue.")
@click.option("--priority", type=int, help="Each job's priority.")
@click.option("--replace", is_flag=True, help="Redefine an existing schedule of this name.")
@json_option
@click.pass_obj
def add(
    settings: Settings,
    *,
    name: str,
    cron: str,
    job_type: str,
    payload: dict[str, JSON],
    tz: str,
    catch_up: str,
    jitter: float,
    org: str | None,
    queue: str | None,
    priority: int | None,
    replace: bool,
    as_json: bool,
) -> None:
    """Add schedule NAME (with --replace: redefine it; its slots start afresh)."""
    with open_ledger(settings.url) as ledger:
        try:
            state = ledger.schedules.add(
                name,
                cron,
                job_type,
                payload,
                tz=tz,
                catch_up=catch_up,
                jitter_s=jitter,
                org=org,
                queue=queue,
                priority=priority,
                replace=replace,
            )
        except InvalidCronError as error:  # the expression never matches in this zone
            raise click.BadParameter(error.message, param_hint="--cron") from None
    _done(state, "replaced" if replace else "added", as_json)


@schedule.command(name="list")
@json_option
@click.pass_obj
def list_(settings: Settings, *, as_json: bool) -> None:
    """List the schedules (removed ones too)."""
    with open_reader(settings) as source:
        states = source.reader.store.states(SCHEDULES)
    if as_json:
        echo_json([schedule_json(state) for state in states])
        return
    rows = [
        [
            s.name,
            s.status.value,
            s.cron,
            s.tz,
            s.job_type,
            when(upcoming(s)),
            when(s.last_slot),
            str(s.fired),
            str(s.missed),
        ]
        for s in states
    ]
    headers = ["NAME", "STATUS", "CRON", "TZ", "TYPE", "NEXT", "LAST", "FIRED", "MISSED"]
    click.echo(table(headers, rows))


@schedule.command()
@click.argument("name")
@json_option
@click.pass_obj
def show(settings: Settings, *, name: str, as_json: bool) -> None:
    """Show schedule NAME: its last and next slots, the job each fired slot made, and its
    missed slots."""
    with open_reader(settings) as source:
        detail = schedule_detail(source.reader.store, name)
    if detail is None:
        raise ScheduleNotFoundError(f"no schedule {name!r}")
    if as_json:
        echo_json(schedule_detail_json(detail))
        return
    click.echo(_detail_text(detail))


def _detail_text(detail: ScheduleDetail) -> str:
    s = detail.state
    lines = [
        fields(
            [
                ("name", s.name),
                ("status", s.status.value),
                ("cron", f"{s.cron} ({s.tz})"),
                ("job type", s.job_type),
                ("payload", compact_json(s.payload, 200)),
                ("org", scalar(s.org)),
                ("queue", scalar(s.queue)),
                ("catch-up", s.catch_up.value),
                ("jitter", f"{s.jitter_s:g}s"),
                ("fired", str(s.fired)),
                ("missed", str(s.missed)),
            ]
        ),
        "",
        "last slots:",
    ]
    fired = [
        [when(f.slot), str(f.job_id), "yes" if f.created else "no (existed)", when(f.run_at)]
        for f in detail.fired
    ]
    lines.append(table(["SLOT", "JOB", "CREATED", "RUN AT"], fired) if fired else "  (none)")
    lines += ["", "missed:"]
    missed = [
        [when(m.slots[0]) if m.slots else MISSING, when(m.through), str(m.count), _why(m)]
        for m in detail.missed
    ]
    lines.append(table(["FROM", "THROUGH", "COUNT", "WHY"], missed) if missed else "  (none)")
    lines += ["", "next slots:"]
    lines += [f"  {when(slot)}" for slot in detail.next_slots] or ["  (none: not active)"]
    return "\n".join(lines)


def _why(missed: MissedSlotsView) -> str:
    return missed.reason or f"catch-up {missed.policy}"


def _status_command(verb: str, past: str) -> click.Command:
    @click.argument("name")
    @click.option(
        "--reason",
        default=f"{past} by operator",
        show_default=True,
        help="Recorded in the event.",
    )
    @json_option
    @click.pass_obj
    def command(settings: Settings, *, name: str, reason: str, as_json: bool) -> None:
        with open_ledger(settings.url) as ledger:
            act: Callable[..., ScheduleState] = getattr(ledger.schedules, verb)
            state = act(name, reason=reason)
        _done(state, past, as_json)

    command.__doc__ = f"{verb.capitalize()} schedule NAME (an event in its history)."
    return schedule.command(name=verb)(command)


pause = _status_command("pause", "paused")
resume = _status_command("resume", "resumed")
remove = _status_command("remove", "removed")


def _done(state: ScheduleState, past: str, as_json: bool) -> None:
    if as_json:
        echo_json(schedule_json(state))
        return
    coming = upcoming(state)
    tail = f"; next slot {when(coming)}" if coming is not None else ""
    echo_line(f"{past} schedule {state.name} ({state.status.value}){tail}")
