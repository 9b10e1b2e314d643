"""The fire transaction: every due schedule's slots fired (a job each) or missed, in one
unit of work, so that each slot makes its job exactly once however many schedulers run.

1. A cheap read without a lock: is anything due? Most passes stop here.
2. Under the append lock (:meth:`~ledger.store.unit_of_work.UnitOfWork.serialise_appends`)
   the due schedules are read again: a scheduler that lost the race to another sees their
   cursors moved past the slots and finds nothing due.
3. Per schedule, :func:`~ledger.core.schedules.catch_up.plan_pass` says which slots fire and
   which are missed; the fired slots' requests go through the normal enqueue planning
   (:func:`~ledger.core.enqueue_plan.plan_enqueue`, with the jobs already holding their
   idempotency keys looked up as a batch enqueue does), each keyed by its slot, so even a
   slot whose cursor did not move (a job enqueued by hand with the slot's key) names the job
   that holds the key instead of making a second one.
4. A schedule whose slots cannot be read (its stored cron expression or time zone refused
   by this release's cronsim or tzdata) or planned (a jitter stored before it was bounded
   that pushes ``run_at`` past the year 9999) is left as it is and reported in ``broken``; a
   schedule whose jobs enqueue refuses (the type disabled or undefined, the key held by a
   job asked with other fields, a stored payload this release refuses) records its slots as
   ``schedule_missed`` with the refusal as
   the reason; the other schedules fire regardless.
5. One :meth:`~ledger.store.unit_of_work.UnitOfWork.append` of the new jobs and every
   schedule's events (``schedule_missed`` first: older slots; then a ``schedule_fired`` per
   slot naming its job).

A writer that appended to a schedule's stream first makes the append fail with
:class:`~ledger.core.errors.ConcurrencyConflictError` (the unique stream version); the pass
reports the conflict and the next pass reads again.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from uuid import UUID

import msgspec

from ledger.clock import Clock
from ledger.core.enqueue_plan import EnqueuePlan, plan_enqueue
from ledger.core.errors import (
    ConcurrencyConflictError,
    DefinitionNotFoundError,
    IdempotencyConflictError,
    InvalidRequestError,
)
from ledger.core.events import Event, JobEvent
from ledger.core.requests import normalise_request
from ledger.core.schedules.catch_up import MAX_NAMED_MISSED, PassBounds, PassPlan, plan_pass
from ledger.core.schedules.errors import UnplannableScheduleError
from ledger.core.schedules.events import ScheduleFired, ScheduleMissed
from ledger.core.schedules.slots import InvalidCronError, UnknownTimeZoneError
from ledger.core.schedules.state import ScheduleState
from ledger.core.times import to_us
from ledger.core.values import JobDefinition
from ledger.jobs.enqueueing import stored_keys
from ledger.store.store import Store
from ledger.store.unit_of_work import UnitOfWork
from ledger.views.kinds import DEFINITIONS, JOBS, SCHEDULES

DEFAULT_SCHEDULES_PER_PASS = 100


class FiredSlot(msgspec.Struct, frozen=True):
    """A slot this pass fired, and the job its key names."""

    schedule: str
    slot: datetime
    job_id: UUID
    created: bool


class MissedSlots(msgspec.Struct, frozen=True):
    """Slots of one schedule this pass missed; ``reason`` ``None``: by its catch-up policy."""

    schedule: str
    count: int
    through: datetime
    reason: str | None


class BrokenSchedule(msgspec.Struct, frozen=True):
    """A due schedule whose slots this pass could not read: nothing is appended for it."""

    schedule: str
    error: str


class FireReport(msgspec.Struct, frozen=True):
    """What one fire pass did."""

    fired: list[FiredSlot]
    missed: list[MissedSlots]
    schedules: int
    """How many due schedules the pass read under the lock."""
    more: bool
    """The pass read as many due schedules as it may: more may be due."""
    conflict: bool = False
    """Another writer appended to a schedule first: nothing was appended."""
    contended: bool = False
    """Something was due before the append lock and nothing under it: another scheduler
    fired those slots first."""
    broken: list[BrokenSchedule] = []
    """Due schedules left unfired because their slots could not be read."""


EMPTY = FireReport([], [], 0, more=False)


def fire_due(
    store: Store,
    clock: Clock,
    now: datetime | None,
    *,
    bounds: PassBounds,
    limit: int,
    auto_define: bool,
    new_id: Callable[[], UUID],
) -> FireReport:
    """One fire pass at ``now`` (the clock's by default) over up to ``limit`` due schedules
    (see the module docstring)."""
    moment = clock.now() if now is None else now
    now_us = to_us(moment)
    if not store.read("schedules_due", {"now": now_us, "limit": 1}):
        return EMPTY
    try:
        with store.unit_of_work() as uow:
            uow.serialise_appends()
            due = uow.due_schedules(now_us, limit)
            if not due:
                return FireReport([], [], 0, more=False, contended=True)
            batch = _FireBatch(uow, moment, auto_define, new_id)
            broken: list[BrokenSchedule] = []
            for state in due:
                try:
                    plan = plan_pass(state, moment, bounds)
                except (
                    InvalidCronError,
                    UnknownTimeZoneError,
                    UnplannableScheduleError,
                ) as unreadable:
                    # One schedule's expression (or stored jitter) must not stop every other
                    # schedule's slots.
                    broken.append(BrokenSchedule(state.name, unreadable.message))
                    continue
                batch.add(state, plan)
            batch.append()
    except ConcurrencyConflictError:
        return FireReport([], [], 0, more=True, conflict=True)
    return FireReport(batch.fired, batch.missed, len(due), more=len(due) >= limit, broken=broken)


class _FireBatch:
    """The jobs and schedule events of one pass, gathered schedule by schedule."""

    def __init__(
        self,
        uow: UnitOfWork,
        now: datetime,
        auto_define: bool,
        new_id: Callable[[], UUID],
    ) -> None:
        self._uow = uow
        self._now = now
        self._auto_define = auto_define
        self._new_id = new_id
        self._defined: dict[str, JobDefinition] = {}
        """Types this pass defines (with ``auto_define``): a later schedule of the same
        type must not define it again."""
        self.job_changes: list[tuple[UUID, Sequence[JobEvent]]] = []
        self.definition_changes: list[tuple[str, Sequence[Event]]] = []
        self.schedule_changes: list[tuple[str, Sequence[Event]]] = []
        self.fired: list[FiredSlot] = []
        self.missed: list[MissedSlots] = []

    def add(self, state: ScheduleState, plan: PassPlan) -> None:
        """One schedule's events (and jobs) for ``plan``."""
        if plan.empty:
            return
        events: list[Event] = []
        if plan.missed is not None:
            missed = plan.missed
            events.append(self._missed(state, missed.slots, missed.count, missed.through, None))
        if plan.fires:
            try:
                enqueued = self._plan_jobs(state, plan)
            except (
                DefinitionNotFoundError,
                IdempotencyConflictError,
                InvalidRequestError,
            ) as refused:
                slots = [fire.slot for fire in plan.fires]
                named = slots[:MAX_NAMED_MISSED]
                events.append(self._missed(state, named, len(slots), slots[-1], refused.message))
            else:
                self.job_changes.extend(enqueued.job_changes)
                self.definition_changes.extend(enqueued.definition_changes)
                for fire, job_id, created in zip(
                    plan.fires, enqueued.results, enqueued.created, strict=True
                ):
                    assert job_id is not None  # a slot's request has no subject to dedupe
                    run_at = fire.request.run_at
                    assert run_at is not None
                    events.append(
                        ScheduleFired(
                            at=self._now,
                            schedule=state.name,
                            slot=fire.slot,
                            job_id=job_id,
                            created=created,
                            run_at=run_at,
                        )
                    )
                    self.fired.append(FiredSlot(state.name, fire.slot, job_id, created))
        self.schedule_changes.append((state.name, events))

    def _plan_jobs(self, state: ScheduleState, plan: PassPlan) -> EnqueuePlan:
        requests = [normalise_request(fire.request) for fire in plan.fires]
        known = {
            job_type: found.definition
            for job_type, found in self._uow.states(DEFINITIONS, [state.job_type]).items()
        }
        known.update(self._defined)
        enqueued = plan_enqueue(
            requests,
            known,
            stored_keys=stored_keys(self._uow, requests),
            live_subjects={},
            now=self._now,
            auto_define=self._auto_define,
            new_id=self._new_id,
            actor=f"schedule {state.name}",
        )
        for job_type, _ in enqueued.definition_changes:
            self._defined[job_type] = JobDefinition(job_type=job_type)
        return enqueued

    def _missed(
        self,
        state: ScheduleState,
        slots: list[datetime],
        count: int,
        through: datetime,
        reason: str | None,
    ) -> ScheduleMissed:
        self.missed.append(MissedSlots(state.name, count, through, reason))
        return ScheduleMissed(
            at=self._now,
            schedule=state.name,
            slots=slots,
            count=count,
            through=through,
            policy=state.catch_up.value,
            reason=reason,
        )

    def append(self) -> None:
        if self.schedule_changes:
            self._uow.append(
                [
                    DEFINITIONS.changes(self.definition_changes),
                    SCHEDULES.changes(self.schedule_changes),
                    JOBS.changes(self.job_changes),
                ]
            )
