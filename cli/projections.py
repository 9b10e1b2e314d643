"""``jobledger projections``: list, status, rebuild and verify the views derived from history."""

from __future__ import annotations

import signal
import threading
from types import FrameType

import click

from . import params
from .database import Settings, open_ledger
from .progress import ProgressBars
from .read_target import open_reader
from .render import MISSING, compact_json, echo_json, json_option, table
from ledger.api.shaping import plain, projection_json, verify_report_json
from ledger.views.catalog import ALL_JOB_EVENTS, BY_NAME, PROJECTIONS
from ledger.views.diff import VerifyReport, ViewReport
from projections.follower import Follower, FollowerStats
from projections.tracked import CatchUp

NAMES = click.Choice(list(BY_NAME))
DRIFT_EXIT = 1
"""``verify`` exits with this when any view drifted (a refused command also exits 1)."""


@click.group()
def projections() -> None:
    """Rebuild, verify and inspect the views (projections) derived from the history."""


@projections.command(name="list")
@json_option
def list_projections(as_json: bool) -> None:
    """The projections this code defines: name, mode, schema version, table, the events that
    change it."""
    if as_json:
        echo_json([projection_json(p) for p in PROJECTIONS])
        return
    rows = [
        [p.name, p.mode, str(p.version), p.table, _events_text(p.events), p.description]
        for p in PROJECTIONS
    ]
    click.echo(table(["NAME", "MODE", "VERSION", "TABLE", "EVENTS", "DESCRIPTION"], rows))


def _events_text(events: tuple[str, ...]) -> str:
    return "every job event" if events == ALL_JOB_EVENTS else ", ".join(events)


@projections.command()
@json_option
@click.pass_obj
def status(settings: Settings, as_json: bool) -> None:
    """Each projection's schema version (code and recorded), position and lag."""
    with open_reader(settings) as source:
        statuses = source.reader.projections().status()
    if as_json:
        echo_json(plain(statuses))
        return
    rows = [
        [
            s.name,
            s.mode,
            str(s.code_version),
            MISSING if s.recorded_version is None else str(s.recorded_version),
            "stale" if s.stale else "current",
            str(s.position),
            str(s.lag),
        ]
        for s in statuses
    ]
    headers = ["NAME", "MODE", "CODE", "RECORDED", "STATE", "POSITION", "LAG"]
    click.echo(table(headers, rows))
    if any(s.stale for s in statuses):
        click.echo("stale projections are rebuilt by `jobledger migrate` (or `init`)", err=True)


@projections.command()
@click.argument("names", nargs=-1, type=NAMES)
@click.option("--all", "all_", is_flag=True, help="Rebuild every projection.")
@json_option
@click.pass_obj
def rebuild(settings: Settings, names: tuple[str, ...], all_: bool, as_json: bool) -> None:
    """Rebuild NAME… (or --all) from the history into shadow tables and swap them in."""
    if bool(names) == all_:
        raise click.UsageError("name the projections to rebuild, or pass --all")
    bars = ProgressBars()
    try:
        with open_ledger(settings.url) as ledger:
            report = ledger.projections(progress=bars).rebuild(None if all_ else list(names))
    finally:
        bars.close()
    if as_json:
        echo_json(plain(report))
        return
    rate = report.events / report.seconds if report.seconds > 0 else 0.0
    rows = ", ".join(f"{name} {count}" for name, count in report.rows.items())
    click.echo(
        f"rebuilt {', '.join(report.names)} to position {report.position}: "
        f"{report.events} events in {report.seconds:.2f}s ({rate:,.0f} events/s); rows: {rows}"
    )


def _view_text(view: ViewReport) -> list[str]:
    verdict = "ok" if view.clean else f"DRIFT in {view.drift_count} row(s)"
    lines = [f"{view.name}  {verdict}  ({view.expected_rows} expected, {view.live_rows} live)"]
    for drift in view.drift:
        key = ", ".join(str(part) for part in drift.key)
        lines.append(f"  {drift.kind} {view.table} [{key}]")
        for column in drift.columns:
            lines.append(
                f"    {column.column}: expected {compact_json(column.expected, 80)}, "
                f"live {compact_json(column.live, 80)}"
            )
    if view.drift_count > len(view.drift):
        lines.append(f"  … and {view.drift_count - len(view.drift)} more")
    return lines


def _report_text(report: VerifyReport) -> str:
    lines = [f"replayed {report.events} events to position {report.position}"]
    for view in report.views:
        lines += _view_text(view)
    return "\n".join(lines)


@projections.command()
@click.argument("name", required=False, type=NAMES)
@click.option(
    "--include-archive",
    is_flag=True,
    help="Verify the hot tables and the archive together (`jobledger retention`).",
)
@json_option
@click.pass_obj
def verify(settings: Settings, name: str | None, include_archive: bool, as_json: bool) -> None:
    """Replay the history and diff NAME (default: every view) against it; exit 1 on drift.

    With --include-archive the history and the views are the hot tables and the archive
    together (where there is none, the hot ones)."""
    bars = ProgressBars()
    try:
        with open_reader(settings, archive=include_archive) as source:
            report = source.reader.projections(progress=bars).verify(
                None if name is None else [name]
            )
    finally:
        bars.close()
    if as_json:
        echo_json(source.tagged(verify_report_json(report)))
    else:
        click.echo(_report_text(report))
    if not report.clean:
        raise SystemExit(DRIFT_EXIT)


TRACKED = click.Choice([p.name for p in PROJECTIONS if p.mode == "tracked"])


@projections.command(name="catch-up")
@click.argument("name", required=False, type=TRACKED)
@json_option
@click.pass_obj
def catch_up(settings: Settings, name: str | None, as_json: bool) -> None:
    """Apply the events after NAME's (default: every tracked projection's) position."""
    with open_ledger(settings.url) as ledger:
        reports = ledger.catch_up(None if name is None else [name])
    if as_json:
        echo_json(plain(reports))
        return
    for report in reports:
        click.echo(
            f"{report.name}: applied {report.applied} events in {report.batches} batch(es); "
            f"position {report.position}"
        )


poll_option = click.option(
    "--poll",
    type=params.Seconds(0.05),
    default=1.0,
    show_default=True,
    metavar="SECONDS",
    help="Longest wait between looks at the head (PostgreSQL also wakes on NOTIFY).",
)
"""A follower's ``--poll`` (``projections follow``, ``integrity follow``)."""


@projections.command()
@click.argument("name", required=False, type=TRACKED)
@poll_option
@json_option
@click.pass_obj
def follow(settings: Settings, name: str | None, poll: float, as_json: bool) -> None:
    """Keep NAME (default: every tracked projection) caught up until SIGINT/SIGTERM.

    Each pass that applied events prints a line (a JSON object with --json).
    """
    with open_ledger(settings.url) as ledger:
        chosen = None if name is None else [BY_NAME[name]]

        def report(reports: list[CatchUp]) -> None:
            for item in reports:
                if item.applied:
                    if as_json:
                        click.echo(compact_json(item))
                    else:
                        click.echo(
                            f"{item.name}: applied {item.applied} events; position {item.position}"
                        )

        follower = Follower(ledger.store, chosen, poll_s=poll, on_pass=report)
        where = ", ".join(runner.projection.name for runner in follower.runners)
        stats = follow_until_signalled(follower, f"following {where}")
    click.echo(
        f"stopped after {stats.passes} pass(es): applied {stats.applied} events, "
        f"{stats.errors} error(s)",
        err=True,
    )


def follow_until_signalled(follower: Follower, what: str) -> FollowerStats:
    """Run ``follower`` until SIGINT or SIGTERM (from the main thread; elsewhere until it is
    stopped), saying ``what`` on stderr first; its stats."""

    def on_signal(signum: int, frame: FrameType | None) -> None:
        follower.stop()

    previous = {}
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGINT, signal.SIGTERM):
            previous[sig] = signal.signal(sig, on_signal)
    click.echo(f"{what}; stop with Ctrl-C", err=True)
    try:
        return follower.run()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
