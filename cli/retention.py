"""``jobledger retention``: the rules that move finished jobs to the archive, and the runs.

Each rule set and each batch a run moves is an event of the retention stream (decision 31,
docs/operations.md "Retention"); nothing is deleted: ``history``, ``export``, ``replay``,
``audit --include-archive`` and ``projections verify --include-archive`` read the archive."""

from __future__ import annotations

from typing import Any

import click

from .database import Settings, open_ledger
from .render import MISSING, echo_json, json_option, table
from ledger.core.errors import InvalidRequestError
from ledger.core.retention import FINISHED_STATUSES, parse_after
from ledger.retention.retention_runs import overview, rule_json, run_json, run_retention, set_rule

_STATUS = click.Choice(list(FINISHED_STATUSES))


def _after(ctx: click.Context, param: click.Parameter, value: str | None) -> int | None:
    """``--after 30d`` as seconds; a malformed one is a usage error (exit 2)."""
    if value is None:
        return None
    try:
        return parse_after(value)
    except InvalidRequestError as exc:
        raise click.BadParameter(exc.message) from None


@click.group()
def retention() -> None:
    """Move finished jobs older than a rule to the archive, keeping their history."""


@retention.command(name="set")
@click.option("--type", "job_type", metavar="TYPE", help="Jobs of this type (default: any).")
@click.option("--status", type=_STATUS, help="Jobs in this finished status (default: any).")
@click.option(
    "--after", callback=_after, metavar="AGE", help="Unchanged for this long: 30d, 12h, 2w…"
)
@click.option("--off", is_flag=True, help="Drop the rule for this type and status.")
@json_option
@click.pass_obj
def set_(
    settings: Settings,
    *,
    job_type: str | None,
    status: str | None,
    after: int | None,
    off: bool,
    as_json: bool,
) -> None:
    """Set the rule for --type and --status (the most specific rule matching a job wins)."""
    if (after is None) == (not off):
        raise click.UsageError("give --after AGE, or --off to drop the rule")
    with open_ledger(settings.url) as ledger:
        policy = set_rule(
            ledger.store,
            ledger.clock.now(),
            job_type=job_type,
            status=status,
            after_s=None if off else after,
        )
    if as_json:
        echo_json({"policy_version": policy.version, "rules": [rule_json(r) for r in policy.rules]})
        return
    click.echo(_rules_text([rule_json(r) for r in policy.rules]))


def _rules_text(rules: list[dict[str, Any]]) -> str:
    if not rules:
        return "no retention rules: nothing is archived"
    rows = [[r["job_type"] or "(any)", r["status"] or "(any)", r["after"]] for r in rules]
    return table(["TYPE", "STATUS", "AFTER"], rows)


@retention.command()
@json_option
@click.pass_obj
def show(settings: Settings, *, as_json: bool) -> None:
    """The rules, what a run would move now, the jobs it must leave and why, the runs so
    far and the tables' sizes."""
    with open_ledger(settings.url) as ledger:
        ledger.catch_up()  # a job waits for the audit view: show what a run would see
        shown = overview(ledger.store, ledger.clock.now())
    if as_json:
        echo_json(shown)
        return
    lines = [_rules_text(shown["rules"]), ""]
    lines.append(f"would move now: {shown['eligible']} jobs; held: {shown['held']}")
    lines += [
        f"  held {h['job_id']} ({h['job_type']}, {h['status']}): {h['reason']}"
        for h in shown["held_jobs"]
    ]
    for unit in shown["partitions"]:  # PostgreSQL: a month moves whole or waits
        verdict = "moves" if unit["moves"] else "waits"
        lines.append(
            f"  {unit['partition']}: {verdict} ({unit['eligible']} of {unit['streams']} "
            "streams eligible)"
        )
    runs = [e for e in shown["events"] if e["event"] == "jobs_archived"]
    moved = sum(e["jobs"] for e in runs)
    last = runs[-1]["at"] if runs else MISSING
    lines.append(f"archived so far: {moved} jobs in {len(runs)} batches (last {last})")
    if shown["archive"] is not None:
        lines.append(f"archive: {shown['archive']}")
    for name, size in shown["sizes"].items():
        lines.append(f"  {name}: {size:,}")
    click.echo("\n".join(lines))


@retention.command()
@click.option("--dry-run", is_flag=True, help="Say what would move; move and record nothing.")
@json_option
@click.pass_obj
def run(settings: Settings, *, dry_run: bool, as_json: bool) -> None:
    """Move the finished jobs past their rule to the archive now (events and view rows;
    each batch recorded as a `jobs_archived` event)."""
    with open_ledger(settings.url) as ledger:
        ledger.catch_up()  # its rows move with the job: the audit view first takes them in
        done = run_retention(ledger.store, ledger.clock.now(), dry_run=dry_run, actor="cli")
    if as_json:
        echo_json(run_json(done))
        return
    if dry_run:
        click.echo(f"would move {done.eligible} jobs; held {done.held}")
        for job_id in done.job_ids:
            click.echo(f"  {job_id}")
        return
    rows = ", ".join(f"{table_} {n:,}" for table_, n in sorted(done.rows.items())) or "none"
    click.echo(
        f"moved {done.moved} jobs in {done.batches} batches to {done.archive} "
        f"(rows: {rows}); held {done.held}, changed meanwhile {done.changed}"
    )
