"""Conversions between aware datetimes and the integer microseconds the views store.

Views store times as microseconds since the Unix epoch (UTC) on both backends: exact
(idempotent repeats compare ``run_at`` to the microsecond), compact, and ordered the same way
in SQLite and PostgreSQL.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def to_us(moment: datetime) -> int:
    delta = moment - EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def from_us(micros: int) -> datetime:
    return EPOCH + timedelta(microseconds=micros)


def opt_us(moment: datetime | None) -> int | None:
    return None if moment is None else to_us(moment)
