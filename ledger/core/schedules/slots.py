"""A schedule's slots: the UTC instants its cron expression names in its time zone. Pure.

The expression is read by ``cronsim`` (docs/architecture.md says why that library), the zone
by :mod:`zoneinfo`. DST follows cronsim, which follows Debian's cron:

- **spring forward**: a slot whose wall time falls in the skipped hour fires once, at the
  transition (``30 2 * * *`` in Europe/Paris on 2026-03-29 fires at 03:00 CEST, 01:00 UTC);
  an expression whose hour field is a wildcard just has no slots in the skipped hour;
- **fall back**: a fixed-time slot in the repeated hour fires once (its first occurrence);
  an expression whose hour field is a wildcard fires in both passes of the hour, since they
  are different instants (``*/30 * * * *`` has slots at 00:00, 00:30, 01:00 and 01:30 UTC).

Either way a slot is named by its UTC instant, so no instant is a slot twice and slots
strictly increase (tests/unit/test_schedule_slots.py holds both as properties).
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from itertools import islice
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cronsim import CronSim, CronSimError

from ledger.core.errors import InvalidRequestError


class InvalidCronError(InvalidRequestError):
    """A cron expression the parser refuses (its message says why)."""

    code = "schedule.invalid_cron"


class UnknownTimeZoneError(InvalidRequestError):
    """A time zone name the zone database does not hold."""

    code = "schedule.unknown_tz"


def zone(tz: str) -> ZoneInfo:
    """The zone named ``tz``, or :class:`UnknownTimeZoneError`."""
    try:
        return ZoneInfo(tz)
    except (ZoneInfoNotFoundError, ValueError):
        raise UnknownTimeZoneError(f"unknown time zone {tz!r}") from None


def check_cron(cron: str, tz: str = "UTC") -> None:
    """Refuse an expression cronsim cannot read, or one that never matches (``30 2 31 2 *``)."""
    try:
        iterator = CronSim(cron, datetime(2000, 1, 1, tzinfo=zone(tz)))
        next(iterator)
    except CronSimError as error:
        raise InvalidCronError(f"bad cron expression {cron!r}: {error}") from None
    except StopIteration:
        raise InvalidCronError(f"cron expression {cron!r} never matches") from None


def iter_slots(cron: str, tz: str, after: datetime) -> Iterator[datetime]:
    """The slots strictly after ``after``, in order, as UTC datetimes (endless); an
    expression cronsim refuses (one stored by a release whose cronsim read it) is
    :class:`InvalidCronError`."""
    # cronsim wants the start in the schedule's zone; it yields wall times in that zone.
    try:
        for moment in CronSim(cron, after.astimezone(zone(tz))):
            yield moment.astimezone(UTC)
    except CronSimError as error:
        raise InvalidCronError(f"bad cron expression {cron!r}: {error}") from None


def slots_between(
    cron: str, tz: str, after: datetime, until: datetime, *, limit: int
) -> list[datetime]:
    """Up to ``limit`` slots in ``(after, until]``, oldest first."""
    found: list[datetime] = []
    for slot in islice(iter_slots(cron, tz, after), limit):
        if slot > until:
            break
        found.append(slot)
    return found


def next_slots(cron: str, tz: str, after: datetime, count: int) -> list[datetime]:
    """The ``count`` slots strictly after ``after``."""
    return list(islice(iter_slots(cron, tz, after), count))


def next_slot(cron: str, tz: str, after: datetime) -> datetime | None:
    """The first slot strictly after ``after`` (``None``: the expression has no more)."""
    return next(iter_slots(cron, tz, after), None)
