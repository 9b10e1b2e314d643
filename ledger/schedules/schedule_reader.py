"""The schedule reads: :class:`ScheduleReader`, what ``reader.schedules`` hands out."""

from __future__ import annotations

from ledger.clock import Clock
from ledger.core.schedules.state import ScheduleState
from ledger.deprecation import warn_once
from ledger.schedules.schedule_reads import SHOWN_SLOTS, ScheduleDetail, schedule_detail
from ledger.store.store import Store
from ledger.views.kinds import SCHEDULES


class ScheduleReader:
    """The schedule reads over one store."""

    def __init__(self, store: Store, clock: Clock) -> None:
        self.store = store
        self.clock = clock

    def __call__(self) -> list[ScheduleState]:
        """Deprecated: ``ledger.schedules()`` was :meth:`all` before the namespace."""
        warn_once("Ledger.schedules()", "ledger.schedules.all()")
        return self.all()

    def all(self) -> list[ScheduleState]:
        """Every schedule, removed ones too, by name."""
        return self.store.states(SCHEDULES)

    def get(self, name: str) -> ScheduleState | None:
        """One schedule (``None``: no such name)."""
        return self.store.state(SCHEDULES, name)

    def detail(self, name: str, count: int = SHOWN_SLOTS) -> ScheduleDetail | None:
        """What ``schedule show`` prints of one schedule: its last fired and missed slots
        and its next ones (``None``: no such name; :mod:`ledger.schedules.schedule_reads`)."""
        return schedule_detail(self.store, name, count)
