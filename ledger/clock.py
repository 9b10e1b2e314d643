"""The one clock.

Every write that stamps time takes ``now`` from a :class:`Clock`. Production code uses
:class:`SystemClock`; tests use :class:`FakeClock` and move time explicitly, so no test
depends on sleeping and no test edits a row to pretend time has passed.
"""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from typing import Protocol


class Clock(Protocol):
    """A source of the current time as an aware UTC datetime."""

    def now(self) -> datetime: ...


class SystemClock:
    """The wall clock, in UTC (datetimes carry microseconds, the precision the views store)."""

    def now(self) -> datetime:
        return datetime.now(UTC)  # noqa: TID251 - the one sanctioned use


class FakeClock:
    """A clock that only moves when told to; safe to share between threads."""

    def __init__(self, start: datetime | None = None) -> None:
        self._now = start or datetime(2026, 1, 1, tzinfo=UTC)
        if self._now.tzinfo is None:
            raise ValueError("FakeClock needs an aware datetime")
        self._lock = threading.Lock()

    def now(self) -> datetime:
        with self._lock:
            return self._now

    def advance(self, seconds: float = 0.0, **delta: float) -> datetime:
        """Move time forward by ``seconds`` (plus any ``timedelta`` keyword) and return it."""
        step = timedelta(seconds=seconds, **delta)
        if step < timedelta(0):
            raise ValueError("time only moves forward")
        with self._lock:
            self._now += step
            return self._now

    def set(self, when: datetime) -> None:
        """Jump to ``when``; it may not be earlier than the current time."""
        with self._lock:
            if when < self._now:
                raise ValueError("time only moves forward")
            self._now = when
