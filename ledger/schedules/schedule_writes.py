"""Schedule commands: add (or replace), pause, resume, remove. Each is one event in the
schedule's own stream, appended under the append lock so that two commands at once cannot
both pass the check of the status they read.

What a schedule will enqueue is checked when it is added, the way enqueue would check each of
its jobs (the type is defined and enabled, the payload, org, queue and priority are valid),
so a bad schedule is refused by its ``add``, not at its first slot. The fire transaction is
:mod:`ledger.schedules.schedule_firing`.
"""

from __future__ import annotations

from collections.abc import Callable

import msgspec

from ledger.clock import Clock
from ledger.core.errors import DefinitionNotFoundError, InvalidRequestError
from ledger.core.events import Event
from ledger.core.limits import check_name, check_reason, check_seconds
from ledger.core.requests import normalise_request
from ledger.core.schedules.errors import (
    ScheduleExistsError,
    ScheduleNotFoundError,
    ScheduleTransitionError,
)
from ledger.core.schedules.events import (
    CatchUp,
    ScheduleAdded,
    SchedulePaused,
    ScheduleRemoved,
    ScheduleResumed,
)
from ledger.core.schedules.slots import check_cron
from ledger.core.schedules.state import ScheduleState, ScheduleStatus
from ledger.core.values import JSON, EnqueueRequest
from ledger.store.store import Store
from ledger.store.unit_of_work import UnitOfWork
from ledger.views.kinds import DEFINITIONS, SCHEDULES


class ScheduleSpec(msgspec.Struct, frozen=True, kw_only=True):
    """What a schedule enqueues and when: the fields of its ``schedule_added``."""

    name: str
    cron: str
    job_type: str
    payload: dict[str, JSON] = msgspec.field(default_factory=dict)
    tz: str = "UTC"
    catch_up: str = CatchUp.LATEST.value
    jitter_s: float = 0.0
    org: str | None = None
    queue: str | None = None
    priority: int | None = None


def check_spec(spec: ScheduleSpec) -> ScheduleSpec:
    """``spec`` validated (its payload as plain JSON), or the error enqueue or the cron
    parser would raise."""
    check_name(spec.name, "schedule name")
    check_cron(spec.cron, spec.tz)
    try:
        CatchUp(spec.catch_up)
    except ValueError:
        choices = ", ".join(policy.value for policy in CatchUp)
        raise InvalidRequestError(
            f"catch_up must be one of {choices}, not {spec.catch_up!r}"
        ) from None
    # Bounded like every other duration: a jitter past the year 9999 cannot be added to a slot.
    jitter_s = check_seconds(spec.jitter_s, "jitter_s", zero=True)
    request = normalise_request(
        EnqueueRequest(
            job_type=spec.job_type,
            payload=spec.payload,
            org=spec.org,
            queue=spec.queue,
            priority=spec.priority,
        )
    )
    return msgspec.structs.replace(spec, payload=request.payload, jitter_s=jitter_s)


def add_schedule(
    store: Store,
    clock: Clock,
    spec: ScheduleSpec,
    *,
    replace: bool,
    auto_define: bool,
    reason: str,
) -> ScheduleState:
    """Add a schedule, or with ``replace`` redefine an existing one (a new
    ``schedule_added``: its slots start afresh after it). A removed schedule's name may be
    added again without ``replace``; its stream goes on."""
    checked = check_spec(spec)
    check_reason(reason)
    with store.unit_of_work() as uow:
        uow.serialise_appends()
        current = uow.state(SCHEDULES, checked.name)
        if current is not None and current.status is not ScheduleStatus.REMOVED and not replace:
            raise ScheduleExistsError(
                f"schedule {checked.name!r} exists (replace it with --replace)"
            )
        _check_job_type(uow, checked.job_type, auto_define)
        event = ScheduleAdded(
            at=clock.now(),
            schedule=checked.name,
            cron=checked.cron,
            tz=checked.tz,
            job_type=checked.job_type,
            payload=checked.payload,
            org=checked.org,
            queue=checked.queue,
            priority=checked.priority,
            catch_up=checked.catch_up,
            jitter_s=checked.jitter_s,
            reason=reason,
        )
        return _append(uow, checked.name, event)


def _check_job_type(uow: UnitOfWork, job_type: str, auto_define: bool) -> None:
    """Refuse a type enqueue would refuse: undefined (unless the ledger defines types on
    first use) or disabled."""
    definition = uow.state(DEFINITIONS, job_type)
    if definition is None and not auto_define:
        raise DefinitionNotFoundError(f"job type {job_type!r} is not defined")
    if definition is not None and not definition.definition.enabled:
        raise DefinitionNotFoundError(f"job type {job_type!r} is disabled")


def pause_schedule(store: Store, clock: Clock, name: str, reason: str) -> ScheduleState:
    """Stop an active schedule firing (its slots while paused are neither fired nor
    missed)."""
    return _transition(
        store,
        name,
        reason,
        verb="pause",
        expected=ScheduleStatus.ACTIVE,
        event=lambda: SchedulePaused(at=clock.now(), schedule=name, reason=reason),
    )


def resume_schedule(store: Store, clock: Clock, name: str, reason: str) -> ScheduleState:
    """Fire a paused schedule again, from its next slot after now."""
    return _transition(
        store,
        name,
        reason,
        verb="resume",
        expected=ScheduleStatus.PAUSED,
        event=lambda: ScheduleResumed(at=clock.now(), schedule=name, reason=reason),
    )


def remove_schedule(store: Store, clock: Clock, name: str, reason: str) -> ScheduleState:
    """Remove an active or paused schedule (its history stays)."""
    return _transition(
        store,
        name,
        reason,
        verb="remove",
        expected=None,
        event=lambda: ScheduleRemoved(at=clock.now(), schedule=name, reason=reason),
    )


def _transition(
    store: Store,
    name: str,
    reason: str,
    *,
    verb: str,
    expected: ScheduleStatus | None,
    event: Callable[[], Event],
) -> ScheduleState:
    """Append ``event()`` to the live schedule ``name`` if its status is ``expected``
    (``None``: any live status)."""
    check_reason(reason)
    with store.unit_of_work() as uow:
        uow.serialise_appends()
        current = uow.state(SCHEDULES, name)
        if current is None or current.status is ScheduleStatus.REMOVED:
            raise ScheduleNotFoundError(f"no schedule {name!r}")
        if expected is not None and current.status is not expected:
            raise ScheduleTransitionError(
                f"cannot {verb} schedule {name!r}: it is {current.status}"
            )
        return _append(uow, name, event())


def _append(uow: UnitOfWork, name: str, event: Event) -> ScheduleState:
    uow.append([SCHEDULES.change(name, [event])])
    state = uow.state(SCHEDULES, name)
    assert state is not None
    return state
