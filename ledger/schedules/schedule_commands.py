"""The schedule commands: :class:`ScheduleCommands`, what ``ledger.schedules`` hands out.

The reads of :class:`~ledger.schedules.schedule_reader.ScheduleReader` plus add, pause,
resume and remove (:mod:`ledger.schedules.schedule_writes`) and the scheduler's pass
(:mod:`ledger.schedules.schedule_firing`).
"""

from __future__ import annotations

from datetime import datetime

from ledger.core.schedules.catch_up import PassBounds
from ledger.core.schedules.state import ScheduleState
from ledger.core.values import JSON
from ledger.jobs.binding import LedgerBinding
from ledger.schedules import schedule_writes as schedules
from ledger.schedules.schedule_firing import DEFAULT_SCHEDULES_PER_PASS, FireReport, fire_due
from ledger.schedules.schedule_reader import ScheduleReader


class ScheduleCommands(ScheduleReader):
    """The schedule reads and commands of one ledger."""

    def __init__(self, bound: LedgerBinding) -> None:
        super().__init__(bound.store, bound.clock)
        self._bound = bound

    def add(
        self,
        name: str,
        cron: str,
        job_type: str,
        payload: dict[str, JSON] | None = None,
        *,
        tz: str = "UTC",
        catch_up: str = "latest",
        jitter_s: float = 0.0,
        org: str | None = None,
        queue: str | None = None,
        priority: int | None = None,
        replace: bool = False,
        reason: str = "added by operator",
    ) -> ScheduleState:
        """Add a cron schedule: a ``job_type`` job with ``payload`` per slot of ``cron`` read
        in ``tz``; ``catch_up`` (``all``, ``latest``, ``none``) says what slots overdue after
        downtime do. An existing name is ``schedule.exists`` unless ``replace`` (a new
        ``schedule_added``, its slots starting afresh); a bad expression is
        ``schedule.invalid_cron``, a bad zone ``schedule.unknown_tz``, a type enqueue would
        refuse ``job.definition_not_found_or_disabled`` (``docs/schedules.md``)."""
        spec = schedules.ScheduleSpec(
            name=name,
            cron=cron,
            job_type=job_type,
            payload=payload if payload is not None else {},
            tz=tz,
            catch_up=catch_up,
            jitter_s=jitter_s,
            org=org,
            queue=queue,
            priority=priority,
        )
        return schedules.add_schedule(
            self.store,
            self.clock,
            spec,
            replace=replace,
            auto_define=self._bound.auto_define,
            reason=reason,
        )

    def pause(self, name: str, *, reason: str = "paused by operator") -> ScheduleState:
        """Stop a schedule firing; its slots while paused are neither fired nor missed."""
        return schedules.pause_schedule(self.store, self.clock, name, reason)

    def resume(self, name: str, *, reason: str = "resumed by operator") -> ScheduleState:
        """Fire a paused schedule again, from its first slot after now."""
        return schedules.resume_schedule(self.store, self.clock, name, reason)

    def remove(self, name: str, *, reason: str = "removed by operator") -> ScheduleState:
        """Remove a schedule (its history stays; the name may be added again)."""
        return schedules.remove_schedule(self.store, self.clock, name, reason)

    def fire_due(
        self,
        now: datetime | None = None,
        *,
        bounds: PassBounds | None = None,
        limit: int = DEFAULT_SCHEDULES_PER_PASS,
    ) -> FireReport:
        """One scheduler pass at ``now`` (the clock's by default): each due slot of up to
        ``limit`` schedules fired (a job, keyed by the slot) or missed by its catch-up
        policy, in one transaction; safe in any number of processes at once
        (:mod:`ledger.schedules.schedule_firing`)."""
        return fire_due(
            self.store,
            self.clock,
            now,
            bounds=bounds or PassBounds(),
            limit=limit,
            auto_define=self._bound.auto_define,
            new_id=self._bound.new_id,
        )
