"""Job-type commands: ``define``, ``enable``, ``disable`` and ``definitions``."""

from __future__ import annotations

import click
import msgspec

from . import params
from .database import Settings, open_ledger
from .read_target import open_reader
from .render import MISSING, echo_json, echo_line, json_option, scalar, seconds, table
from ledger.api.shaping import plain
from ledger.core.concurrency import limits_of
from ledger.core.errors import InvalidRequestError
from ledger.core.rates import parse_rate, rate_text
from ledger.core.values import BackoffPolicy, JobDefinition, RateLimit

_DEFAULTS = JobDefinition(job_type="-")


def _backoff(base_s: float | None, max_s: float | None, jitter: float | None) -> BackoffPolicy:
    """The backoff policy with the given parts; parts left out keep their defaults."""
    given = {"base_s": base_s, "max_s": max_s, "jitter": jitter}
    return BackoffPolicy(**{key: value for key, value in given.items() if value is not None})


def _backoff_text(backoff: BackoffPolicy) -> str:
    return f"{seconds(backoff.base_s)}..{seconds(backoff.max_s)} ±{backoff.jitter:g}"


class RateParam(click.ParamType[RateLimit]):
    """``N/PERIOD`` (``10/1m``, ``100/1h``): a rate limit; a bad one is a usage error."""

    name = "N/PERIOD"

    def convert(
        self, value: object, param: click.Parameter | None, ctx: click.Context | None
    ) -> RateLimit:
        if isinstance(value, RateLimit):
            return value
        try:
            return parse_rate(str(value))
        except InvalidRequestError as error:
            self.fail(error.message, param, ctx)


def _rate(rate: RateLimit | msgspec.UnsetType) -> str:
    """A rate as ``define --rate`` takes it (``-``: none)."""
    return rate_text(rate) if isinstance(rate, RateLimit) else MISSING


def _summary(definition: JobDefinition) -> str:
    rate = definition.rate
    return (
        f"version {definition.version}, "
        f"{'enabled' if definition.enabled else 'disabled'}, "
        f"max attempts {definition.max_attempts}, "
        f"timeout {seconds(definition.default_timeout_s)}, "
        f"priority {definition.default_priority}, "
        f"backoff {_backoff_text(definition.backoff)}"
        f"{_limits_text(definition)}"
        + (f", rate {_rate(rate)}" if isinstance(rate, RateLimit) else "")
    )


def _limits_text(definition: JobDefinition) -> str:
    """The definition's concurrency limits, as ", limits ..." (empty if it has none)."""
    limits = limits_of(definition)
    if limits is None:
        return ""
    parts = []
    if limits.concurrency is not None:
        parts.append(f"{limits.concurrency} at once")
    if limits.per_org is not None:
        parts.append(f"{limits.per_org} per org")
    if limits.resource is not None:
        parts.append(f"resource {limits.resource} ({limits.resource_limit})")
    return ", limits " + ", ".join(parts)


@click.command()
@click.argument("job_type")
@click.option(
    "--version",
    type=click.IntRange(min=1),
    default=_DEFAULTS.version,
    show_default=True,
    help="Version of the job type's contract, recorded on each job.",
)
@click.option(
    "--max-attempts",
    type=click.IntRange(min=1),
    default=_DEFAULTS.max_attempts,
    show_default=True,
    help="Attempts per run before the job is dead-lettered.",
)
@click.option(
    "--timeout",
    type=params.Seconds(0, open_least=True),
    metavar="SECONDS",
    default=_DEFAULTS.default_timeout_s,
    show_default=True,
    help="Default time an attempt may take.",
)
@click.option(
    "--priority",
    type=int,
    default=_DEFAULTS.default_priority,
    show_default=True,
    help="Default priority (higher runs first).",
)
@click.option(
    "--backoff-base",
    type=params.Seconds(),
    metavar="SECONDS",
    help=f"First retry delay  [default: {_DEFAULTS.backoff.base_s:g}]",
)
@click.option(
    "--backoff-max",
    type=params.Seconds(),
    metavar="SECONDS",
    help=f"Longest retry delay  [default: {_DEFAULTS.backoff.max_s:g}]",
)
@click.option(
    "--backoff-jitter",
    type=click.FloatRange(min=0, max=1, max_open=True),
    metavar="FRACTION",
    help=f"Random spread of each delay, ±  [default: {_DEFAULTS.backoff.jitter:g}]",
)
@click.option(
    "--enabled/--disabled",
    default=True,
    show_default=True,
    help="Whether jobs of this type may be enqueued.",
)
@click.option(
    "--concurrency",
    type=click.IntRange(min=1),
    metavar="K",
    help="At most K jobs of this type leased at once, across every worker  [default: no limit]",
)
@click.option(
    "--per-org",
    type=click.IntRange(min=1),
    metavar="K",
    help="At most K jobs of this type leased at once per org  [default: no limit]",
)
@click.option(
    "--resource",
    metavar="NAME",
    help="A resource shared with other types: at most --resource-limit jobs of all the types "
    "naming it leased at once",
)
@click.option(
    "--resource-limit",
    type=click.IntRange(min=1),
    metavar="K",
    help="The limit of --resource (types naming one resource are held to the smallest)",
)
@click.option(
    "--rate",
    type=RateParam(),
    help="At most N job starts per PERIOD across all workers (10/1m, 100/1h, 5/30s, 1000/d); "
    "jobs over it stay pending.  [default: none]",
)
@click.option(
    "--rate-per-org",
    is_flag=True,
    help="Apply --rate to each org separately instead of to the whole type.",
)
@json_option
@click.pass_obj
def define(
    settings: Settings,
    *,
    job_type: str,
    version: int,
    max_attempts: int,
    timeout: float,
    priority: int,
    backoff_base: float | None,
    backoff_max: float | None,
    backoff_jitter: float | None,
    enabled: bool,
    concurrency: int | None,
    per_org: int | None,
    resource: str | None,
    resource_limit: int | None,
    rate: RateLimit | None,
    rate_per_org: bool,
    as_json: bool,
) -> None:
    """Define job type JOB_TYPE, or replace its definition.

    The definition is replaced whole: options left out take their defaults, not the
    previous values. Re-defining a type identically records nothing. The concurrency
    limits are enforced in every claim's transaction (docs/operations.md).
    """
    if (resource is None) != (resource_limit is None):
        raise click.UsageError("--resource and --resource-limit go together")
    if rate_per_org and rate is None:
        raise click.UsageError("--rate-per-org needs --rate")
    if rate is not None and rate_per_org:
        rate = msgspec.structs.replace(rate, per_org=True)
    with open_ledger(settings.url) as ledger:
        # Read first only to say what happened; define() itself does not report it.
        before = ledger.definition(job_type)
        after = ledger.define(
            job_type,
            version=version,
            max_attempts=max_attempts,
            default_timeout_s=timeout,
            default_priority=priority,
            enabled=enabled,
            backoff=_backoff(backoff_base, backoff_max, backoff_jitter),
            concurrency=concurrency,
            per_org_concurrency=per_org,
            resource=resource,
            resource_limit=resource_limit,
            rate=rate,
        )
    change = "defined" if before is None else "unchanged" if before == after else "updated"
    if as_json:
        echo_json({"change": change, **plain(after)})
    else:
        echo_line(f"{change} {job_type}: {_summary(after)}")


def _set_enabled(settings: Settings, job_type: str, enabled: bool, as_json: bool) -> None:
    with open_ledger(settings.url) as ledger:
        after = ledger.set_enabled(job_type, enabled)
    if as_json:
        echo_json(plain(after))  # the definition as `definitions --json` shows it
    else:
        echo_line(f"{'enabled' if enabled else 'disabled'} {job_type}")


@click.command()
@click.argument("job_type")
@json_option
@click.pass_obj
def enable(settings: Settings, job_type: str, *, as_json: bool) -> None:
    """Allow jobs of type JOB_TYPE to be enqueued again."""
    _set_enabled(settings, job_type, True, as_json)


@click.command()
@click.argument("job_type")
@json_option
@click.pass_obj
def disable(settings: Settings, job_type: str, *, as_json: bool) -> None:
    """Refuse new jobs of type JOB_TYPE.

    Jobs already queued are not affected.
    """
    _set_enabled(settings, job_type, False, as_json)


def _row(definition: JobDefinition) -> list[str]:
    return [
        definition.job_type,
        str(definition.version),
        scalar(definition.enabled),
        str(definition.max_attempts),
        seconds(definition.default_timeout_s),
        str(definition.default_priority),
        _backoff_text(definition.backoff),
        _limits_text(definition).removeprefix(", limits ") or "-",
        _rate(definition.rate),
    ]


@click.command()
@json_option
@click.pass_obj
def definitions(settings: Settings, *, as_json: bool) -> None:
    """List the job types, sorted by name."""
    with open_reader(settings) as source:
        found = sorted(source.reader.definitions(), key=lambda d: d.job_type)
    if as_json:
        echo_json([plain(definition) for definition in found])
    elif not found:
        click.echo("no job types defined")
    else:
        headers = [
            "TYPE",
            "VERSION",
            "ENABLED",
            "ATTEMPTS",
            "TIMEOUT",
            "PRIORITY",
            "BACKOFF",
            "LIMITS",
            "RATE",
        ]
        click.echo(table(headers, [_row(definition) for definition in found]))
