"""Parameter callbacks: turn command-line text into the values the ledger API takes.

Each failure is a :class:`click.BadParameter` (a usage error naming the parameter), raised
while the command line is parsed, before the ledger is opened: a bad command line never
reaches, let alone writes to, the database.
"""

from __future__ import annotations

import math
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from uuid import UUID

import click
import msgspec

from ledger.core.errors import InvalidRequestError
from ledger.core.json_text import duplicate_key, duplicate_key_message
from ledger.core.limits import MAX_DURATION_S, MAX_JSON_DEPTH
from ledger.core.times import EPOCH, parse_moment
from ledger.core.values import JSON

_JSON_KINDS = {
    list: "an array",
    str: "a string",
    int: "a number",
    float: "a number",
    bool: "a boolean",
    type(None): "null",
}


class Seconds(click.FloatRange):
    """A duration option: a finite number of seconds from ``least`` (exclusive with
    ``open_least``) to ``most``, a century by default (the ledger's own bound,
    :data:`~ledger.core.limits.MAX_DURATION_S`). ``nan``, ``inf`` and ``1e12`` are usage
    errors here rather than an ``OverflowError`` later, in a pass that adds them to now."""

    name = "number of seconds"

    def __init__(
        self, least: float = 0.0, *, open_least: bool = False, most: float = MAX_DURATION_S
    ) -> None:
        super().__init__(min=least, max=most, min_open=open_least)

    def _describe_range(self) -> str:
        low = ">" if self.min_open else ">="
        most = MAX_DURATION_S if self.max is None else self.max  # always set by __init__
        return f"x{low}{self.min:g}, at most {_span(most)}"  # not x<=3153600000.0

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        seconds = super().convert(value, param, ctx)
        if math.isnan(seconds):  # compares false with both bounds, so the range lets it by
            self.fail(f"{value!r} is not a number of seconds", param, ctx)
        return seconds


def _span(seconds: float) -> str:
    """A bound for people: ``100 years``, ``7 days``, else seconds."""
    for unit, size in (("years", 365 * 86_400), ("days", 86_400)):
        if seconds >= size and seconds % size == 0:
            return f"{seconds / size:g} {unit}"
    return f"{seconds:g}s"


def job_id(ctx: click.Context, param: click.Parameter, value: str) -> UUID:
    """A job id: a UUID in any spelling :class:`uuid.UUID` accepts."""
    try:
        return UUID(value)
    except ValueError:
        raise click.BadParameter(f"{value!r} is not a job id (a UUID)") from None


def run_id(ctx: click.Context, param: click.Parameter, value: str) -> UUID:
    """A workflow run id: a UUID in any spelling :class:`uuid.UUID` accepts."""
    try:
        return UUID(value)
    except ValueError:
        raise click.BadParameter(f"{value!r} is not a run id (a UUID)") from None


def optional_job_id(ctx: click.Context, param: click.Parameter, value: str | None) -> UUID | None:
    """A job id, or ``None`` when the argument or option was not given."""
    return None if value is None else job_id(ctx, param, value)


def job_ids(ctx: click.Context, param: click.Parameter, values: tuple[str, ...]) -> list[UUID]:
    """Job ids of a repeated argument, in the order given."""
    return [job_id(ctx, param, value) for value in values]


def aware_datetime(
    ctx: click.Context, param: click.Parameter, value: str | None
) -> datetime | None:
    """An ISO 8601 time with a time zone, in UTC; a naive time is refused rather than guessed
    at, and so is one that is outside the years 1 to 9999 once in UTC."""
    if value is None:
        return None
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        raise click.BadParameter(f"{value!r} is not an ISO 8601 time") from None
    if moment.utcoffset() is None:
        raise click.BadParameter(f"{value!r} has no time zone; add one, e.g. {value}Z")
    try:
        return moment.astimezone(UTC)
    except OverflowError:
        raise click.BadParameter(f"{value!r} is outside the years 1 to 9999 in UTC") from None


def moment_text(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """A time as ISO 8601 or a span ago (``7d``, ``12h``, ``30m``, ``45s``): its spelling is
    checked now (a usage error); :func:`ledger.core.times.parse_moment` resolves it once the ledger
    is open, so ``7d`` means seven days before that ledger's clock."""
    if value is not None:
        try:
            parse_moment(value, EPOCH)
        except InvalidRequestError as exc:
            raise click.BadParameter(exc.message) from None
    return value


def _read(source: str) -> bytes | str:
    if source == "-":
        return sys.stdin.buffer.read()
    if source.startswith("@"):
        path = source[1:]
        try:
            return Path(path).read_bytes()
        except OSError as exc:
            raise click.BadParameter(
                f"cannot read payload file {path!r}: {exc.strerror or exc}"
            ) from None
    return source


def _origin(value: str) -> str:
    """Where the payload text came from, as a message prefix (empty for literal text)."""
    if value == "-":
        return "stdin is "
    if value.startswith("@"):
        return f"file {value[1:]!r} is "
    return ""


def payload(ctx: click.Context, param: click.Parameter, value: str) -> dict[str, JSON]:
    """A JSON object given as text, as ``@path/to/file.json``, or as ``-`` for stdin."""
    raw = _read(value)
    origin = _origin(value)
    try:
        decoded: Any = msgspec.json.decode(raw)
    except msgspec.DecodeError as exc:
        raise click.BadParameter(f"{origin}not valid JSON ({exc})") from None
    except RecursionError:
        raise click.BadParameter(
            f"{origin}nested too deep to decode (a payload may nest {MAX_JSON_DEPTH} levels)"
        ) from None
    if not isinstance(decoded, dict):
        kind = _JSON_KINDS.get(type(decoded), type(decoded).__name__)
        raise click.BadParameter(f"the payload must be a JSON object, not {kind}")
    unique_keys(raw, origin.removesuffix(" is ") or "the payload")
    return decoded


def unique_keys(raw: bytes | str, what: str) -> None:
    """Refuse JSON text (already decoded) in which an object names a key twice: a usage
    error naming the key, instead of the last value silently winning."""
    key = duplicate_key(raw)
    if key is not None:
        raise click.BadParameter(duplicate_key_message(what, key))
