"""The errors a schedule command raises on purpose (besides a bad cron expression or time
zone, :mod:`ledger.core.schedules.slots`), each with its stable code."""

from __future__ import annotations

from ledger.core.errors import LedgerError


class ScheduleNotFoundError(LedgerError):
    """No schedule has this name (or it was removed)."""

    code = "schedule.not_found"


class ScheduleExistsError(LedgerError):
    """A schedule of this name exists and the add did not ask to replace it."""

    code = "schedule.exists"


class ScheduleTransitionError(LedgerError):
    """A command the schedule's status does not allow (pausing a paused one...)."""

    code = "schedule.invalid_transition"


class UnplannableScheduleError(LedgerError):
    """A stored schedule whose slots cannot be turned into jobs (its jitter pushes a slot's
    ``run_at`` past the latest storable time): written before the jitter was bounded."""

    code = "schedule.unplannable"
