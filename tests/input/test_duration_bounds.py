"""Every duration is bounded at the door (a century; a lease a week), on the command line
and in the API: ``schedule add --jitter 1e12`` used to be accepted and then raise an
OverflowError in every scheduler pass, so that no schedule fired."""

from __future__ import annotations

import math
from typing import Any

import click
import pytest
from cli_tree import every_command
from click.testing import CliRunner

from jobledger_cli.main import cli
from jobledger_cli.params import Seconds
from ledger import Ledger
from ledger.core.errors import InvalidRequestError
from ledger.core.limits import MAX_DURATION_S, MAX_LEASE_S
from ledger.core.reaping import ReaperConfig
from ledger.core.retention import parse_after
from ledger.core.schedules.catch_up import PassBounds
from ledger.maintenance.archiver import ArchiverConfig
from ledger.maintenance.pool_reporter import PoolReporterConfig
from ledger.maintenance.scheduler import SchedulerConfig
from ledger.maintenance.watchdog import WatchdogConfig
from ledger.retention.retention_runs import set_rule
from ledger.runtime.config import PoolConfig

HUGE = ["1e12", "inf", "nan", "1e309"]


def _float_options() -> list[tuple[str, click.Parameter]]:
    return [
        (f"{' '.join(path)} {param.opts[0]}", param)
        for path, command in every_command()
        for param in command.params
        if isinstance(param.type, click.FloatRange)
    ]


def test_every_float_option_is_a_bounded_duration() -> None:
    """Each float option of every command is a :class:`Seconds` with a finite upper bound
    (the one exception, ``--backoff-jitter``, is a fraction below 1)."""
    options = _float_options()
    assert len(options) >= 20
    for name, param in options:
        if name == "define --backoff-jitter":
            assert param.type.max == 1  # type: ignore[attr-defined]
            continue
        assert isinstance(param.type, Seconds), name
        assert param.type.max is not None and param.type.max <= MAX_DURATION_S, name


@pytest.mark.parametrize("value", HUGE)
@pytest.mark.parametrize(
    "args",
    [
        ["schedule", "add", "s", "--cron", "* * * * *", "--type", "t", "--jitter"],
        ["enqueue", "t", "--delay"],
        ["enqueue", "t", "--timeout"],
        ["define", "t2", "--backoff-max"],
        ["reap", "--retry-delay"],
        ["worker", "--app", "x:y", "--lease"],
        ["worker", "--app", "x:y", "--scheduler-interval"],
        ["history", "00000000-0000-7000-8000-000000000000", "--linger"],
    ],
    ids=lambda args: " ".join(a for a in args if a.startswith("-") or a.isalpha()),
)
def test_a_duration_past_its_bound_is_a_usage_error(
    sqlite_url: str, args: list[str], value: str
) -> None:
    """``1e12``, ``inf``, ``nan``: one ``error:`` line naming the option, exit 2, nothing
    appended."""
    with Ledger.open(sqlite_url) as ledger:
        ledger.define("t")
        before = ledger.store.head_position()
    result = CliRunner().invoke(cli, ["--db", sqlite_url, *args, value])
    assert result.exit_code == 2, (result.stdout, result.stderr, result.exception)
    [line] = result.stderr.splitlines()
    assert line.startswith(f"error: Invalid value for '{args[-1]}'"), line
    with Ledger.open(sqlite_url) as ledger:
        assert ledger.store.head_position() == before


def test_the_worker_lease_is_bounded_to_a_week(sqlite_url: str) -> None:
    """``--lease`` takes at most ``MAX_LEASE_S`` (what a claim may take), not a century."""
    result = CliRunner().invoke(cli, ["--db", sqlite_url, "worker", "--app", "x:y", "--lease",
                                      str(MAX_LEASE_S + 1)])  # fmt: skip
    assert result.exit_code == 2 and "--lease" in result.stderr


@pytest.mark.parametrize("jitter_s", [1e12, MAX_DURATION_S + 1, math.inf, math.nan, -1.0])
def test_add_schedule_refuses_a_jitter_past_a_century(ledger: Ledger, jitter_s: float) -> None:
    """The API refuses what ``--jitter`` refuses (request.invalid), nothing appended."""
    ledger.define("t")
    before = ledger.store.head_position()
    with pytest.raises(InvalidRequestError, match="jitter_s must be a number of seconds"):
        ledger.schedules.add("s", "* * * * *", "t", jitter_s=jitter_s)
    assert ledger.store.head_position() == before
    ledger.schedules.add("s", "* * * * *", "t", jitter_s=MAX_DURATION_S)  # the bound itself


@pytest.mark.parametrize("after_s", [10**20, int(MAX_DURATION_S) + 1, 0, -5, 2.5, True])
def test_a_retention_age_past_a_century_is_refused(ledger: Ledger, after_s: object) -> None:
    """``set_rule`` (and so ``retention set --after``) refuses an age the rule's event could
    not even encode (an int past 64 bits ended in an OverflowError traceback)."""
    with pytest.raises(InvalidRequestError, match="retention age"):
        set_rule(ledger.store, ledger.clock.now(), job_type=None, status=None,
                 after_s=after_s)  # type: ignore[arg-type]  # fmt: skip


def test_retention_set_after_a_huge_age_is_one_error_line(sqlite_url: str) -> None:
    """The issue's shape of it from the shell: ``--after 99999999999999999w``."""
    result = CliRunner().invoke(cli, ["--db", sqlite_url, "retention", "set", "--after",
                                      "99999999999999999w"])  # fmt: skip
    assert result.exit_code == 2, result.exception
    assert "retention age" in result.stderr and len(result.stderr.splitlines()) == 1
    assert parse_after("5200w") == 5200 * 604_800  # a century is 5214 weeks


@pytest.mark.parametrize(
    "setting",
    [
        {"lease_s": MAX_LEASE_S * 2},
        {"poll_interval_s": math.nan},
        {"scheduler_interval_s": 1e300},
        {"reaper_retry_delay_s": math.inf},
        {"retention_interval_s": 1e12},
        {"breaker_cooldown_s": 1e12},
    ],
    ids=lambda setting: next(iter(setting)),
)
def test_a_pool_refuses_a_duration_setting_past_its_bound(setting: dict[str, float]) -> None:
    """PoolConfig (WorkerPool's settings) refuses it when built, not in a later pass."""
    with pytest.raises(ValueError, match=next(iter(setting))):
        PoolConfig(**setting)  # type: ignore[arg-type]


def test_the_reaper_refuses_a_retry_delay_past_a_century() -> None:
    """ReaperConfig (``Ledger.reap``'s) refuses an unbounded retry delay or interval."""
    for setting in ({"retry_delay_s": 1e12}, {"interval_s": math.inf}, {"lock_timeout_s": 1e300}):
        with pytest.raises(ValueError, match=next(iter(setting))):
            ReaperConfig(**setting)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "build",
    [
        lambda: SchedulerConfig(interval_s=1e300),
        lambda: SchedulerConfig(bounds=PassBounds(grace_s=math.inf)),
        lambda: ArchiverConfig(interval_s=math.nan),
        lambda: PoolReporterConfig(interval_s=1.0, retention_s=1e300),
        lambda: WatchdogConfig(silent_s=math.inf),
    ],
    ids=["scheduler", "pass-grace", "archiver", "pool-reporter", "watchdog"],
)
def test_each_maintenance_service_refuses_an_unbounded_setting(build: Any) -> None:
    """The services a pool runs, built directly (as tests and embedders do), hold the same
    bound as the pool's settings."""
    with pytest.raises(ValueError, match="must be a number of seconds"):
        build()
