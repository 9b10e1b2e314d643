"""Conversions between aware datetimes and the integer microseconds the views store.

Views store times as microseconds since the Unix epoch (UTC) on both backends: exact
(idempotent repeats compare ``run_at`` to the microsecond), compact, and ordered the same way
in SQLite and PostgreSQL.
"""

from __future__ import annotations

import re
from datetime import UTC, date, datetime, timedelta

from ledger.core.errors import InvalidRequestError

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

_RELATIVE = re.compile(r"^(\d+)([dhms])$")
_UNITS = {"d": "days", "h": "hours", "m": "minutes", "s": "seconds"}


def to_us(moment: datetime) -> int:
    delta = moment - EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def from_us(micros: int) -> datetime:
    return EPOCH + timedelta(microseconds=micros)


def opt_us(moment: datetime | None) -> int | None:
    return None if moment is None else to_us(moment)


def parse_moment(text: str, now: datetime) -> datetime:
    """A time given as ISO 8601 (a date is midnight UTC; a date-time needs a time zone) or as
    a span ago: ``7d``, ``12h``, ``30m``, ``45s`` before ``now``."""
    relative = _RELATIVE.match(text.strip())
    if relative:
        amount, unit = relative.groups()
        try:
            return now - timedelta(**{_UNITS[unit]: int(amount)})
        except OverflowError:
            raise InvalidRequestError(f"{text!r} reaches before the year 1") from None
    try:
        day = date.fromisoformat(text)
    except ValueError:
        pass
    else:
        return datetime(day.year, day.month, day.day, tzinfo=UTC)
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise InvalidRequestError(
            f"{text!r} is not a time: use ISO 8601 (2026-11-29, 2026-11-29T10:00:00Z) "
            "or a span ago (7d, 12h, 30m, 45s)"
        ) from None
    if moment.utcoffset() is None:
        raise InvalidRequestError(f"{text!r} has no time zone; add one, e.g. {text}Z")
    return moment
