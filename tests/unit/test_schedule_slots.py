"""Slot arithmetic and the catch-up decision of cron schedules (pure, no database)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from itertools import pairwise
from uuid import UUID, uuid4

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.core.schedules.catch_up import PassBounds, jitter, plan_pass, slot_key, split_due
from ledger.core.schedules.events import CatchUp, ScheduleAdded, ScheduleFired, ScheduleMissed
from ledger.core.schedules.slots import InvalidCronError, check_cron, next_slots, slots_between
from ledger.core.schedules.state import ScheduleStatus, evolve_schedule
from ledger.core.state import IllegalTransitionError

PARIS = "Europe/Paris"


def utc(*parts: int) -> datetime:
    return datetime(*parts, tzinfo=UTC)  # type: ignore[misc]


def test_spring_forward_fixed_slot_fires_once_at_the_transition() -> None:
    """02:30 Paris does not exist on 2026-03-29: the slot fires at 03:00 CEST (01:00 UTC)."""
    slots = next_slots("30 2 * * *", PARIS, utc(2026, 3, 28, 12), 3)
    assert slots == [utc(2026, 3, 29, 1), utc(2026, 3, 30, 0, 30), utc(2026, 3, 31, 0, 30)]


def test_spring_forward_wildcard_hour_skips_the_missing_hour() -> None:
    """``*/30 * * * *`` has no slots in the skipped hour and none twice."""
    slots = slots_between("*/30 * * * *", PARIS, utc(2026, 3, 29, 0), utc(2026, 3, 29, 2), limit=10)
    assert slots == [utc(2026, 3, 29, 0, 30), utc(2026, 3, 29, 1), utc(2026, 3, 29, 1, 30),
                     utc(2026, 3, 29, 2)]  # fmt: skip


def test_fall_back_fixed_slot_fires_once() -> None:
    """02:30 Paris happens twice on 2026-10-25: the slot is its first occurrence only."""
    slots = next_slots("30 2 * * *", PARIS, utc(2026, 10, 24, 12), 2)
    assert slots == [utc(2026, 10, 25, 0, 30), utc(2026, 10, 26, 1, 30)]


def test_fall_back_wildcard_hour_fires_each_instant() -> None:
    """``*/30`` in the repeated hour: four slots, one per UTC instant."""
    slots = slots_between(
        "*/30 * * * *", PARIS, utc(2026, 10, 24, 23, 45), utc(2026, 10, 25, 1, 30), limit=10
    )
    assert slots == [utc(2026, 10, 25, 0), utc(2026, 10, 25, 0, 30), utc(2026, 10, 25, 1),
                     utc(2026, 10, 25, 1, 30)]  # fmt: skip


@pytest.mark.parametrize("cron", ["61 * * * *", "* * *", "30 2 31 2 *", "hello"])
def test_bad_expressions_are_refused_with_the_parsers_reason(cron: str) -> None:
    """A bad or never-matching expression is ``schedule.invalid_cron``."""
    with pytest.raises(InvalidCronError, match="cron expression"):
        check_cron(cron)


crons = st.sampled_from(["*/5 * * * *", "30 2 * * *", "0 * * * *", "15,45 1-3 * * *", "0 0 * * 0"])
zones = st.sampled_from(["UTC", PARIS, "America/New_York", "Australia/Lord_Howe"])
starts = st.datetimes(min_value=datetime(2020, 1, 1), max_value=datetime(2030, 1, 1)).map(
    lambda d: d.replace(tzinfo=UTC)
)


@settings(max_examples=60, deadline=None)
@given(crons, zones, starts)
def test_slots_strictly_increase_and_never_repeat(cron: str, tz: str, start: datetime) -> None:
    """Across DST changes, slots strictly increase (so no instant is a slot twice)."""
    slots = next_slots(cron, tz, start, 200)
    assert all(a < b for a, b in pairwise(slots))
    assert slots[0] > start


@settings(max_examples=40, deadline=None)
@given(crons, zones, starts, st.integers(min_value=1, max_value=7))
def test_resuming_from_any_slot_continues_the_same_sequence(
    cron: str, tz: str, start: datetime, cut: int
) -> None:
    """The slots after slot k are the sequence's own tail: a cursor never skips or repeats."""
    slots = next_slots(cron, tz, start, 8)
    assert next_slots(cron, tz, slots[cut - 1], 8 - cut) == slots[cut:]


def added(policy: CatchUp, at: datetime, cron: str = "*/5 * * * *") -> ScheduleAdded:
    return ScheduleAdded(
        at=at, schedule="s", cron=cron, tz="UTC", job_type="t", payload={}, org=None,
        queue=None, priority=None, catch_up=policy.value, jitter_s=0.0, reason="test",
    )  # fmt: skip


NOW = utc(2026, 1, 1, 1, 0, 10)  # ten seconds after the 01:00 slot; down since 00:00
BOUNDS = PassBounds(grace_s=60)


def test_all_fires_every_overdue_slot() -> None:
    """``all``: the 12 slots of the hour's downtime and the timely one all fire."""
    plan = plan_pass(evolve_schedule(None, added(CatchUp.ALL, utc(2026, 1, 1))), NOW, BOUNDS)
    assert plan.missed is None
    assert [f.slot for f in plan.fires] == [utc(2026, 1, 1, 0, 5 * i) for i in range(1, 12)] + [
        utc(2026, 1, 1, 1)
    ]


def test_latest_with_a_timely_slot_misses_every_overdue_one() -> None:
    """``latest``: the timely 01:00 slot fires; the 11 overdue ones are missed, named."""
    plan = plan_pass(evolve_schedule(None, added(CatchUp.LATEST, utc(2026, 1, 1))), NOW, BOUNDS)
    assert [f.slot for f in plan.fires] == [utc(2026, 1, 1, 1)]
    assert plan.missed is not None and plan.missed.count == 11
    assert plan.missed.through == utc(2026, 1, 1, 0, 55)


def test_latest_without_a_timely_slot_fires_the_newest_overdue() -> None:
    """``latest``: with every due slot overdue, the newest fires and the rest are missed."""
    now = utc(2026, 1, 1, 1, 3)
    plan = plan_pass(evolve_schedule(None, added(CatchUp.LATEST, utc(2026, 1, 1))), now, BOUNDS)
    assert [f.slot for f in plan.fires] == [utc(2026, 1, 1, 1)]
    assert plan.missed is not None and plan.missed.count == 11


def test_none_misses_every_overdue_slot_and_waits() -> None:
    """``none``: every overdue slot is missed, nothing fires until the next slot."""
    now = utc(2026, 1, 1, 1, 3)
    plan = plan_pass(evolve_schedule(None, added(CatchUp.NONE, utc(2026, 1, 1))), now, BOUNDS)
    assert plan.fires == []
    assert plan.missed is not None and plan.missed.count == 12


def test_a_pass_is_bounded_and_the_next_continues() -> None:
    """A years-old ``all`` schedule fires ``fire_limit`` slots per pass, oldest first."""
    bounds = PassBounds(fire_limit=5, scan_limit=50)
    state = evolve_schedule(None, added(CatchUp.ALL, utc(2020, 1, 1), "* * * * *"))
    plan = plan_pass(state, NOW, bounds)
    assert [f.slot for f in plan.fires] == [utc(2020, 1, 1, 0, m) for m in range(1, 6)]
    fired = ScheduleFired(
        at=NOW, schedule="s", slot=plan.fires[-1].slot, job_id=_id(),
        created=True, run_at=plan.fires[-1].slot,
    )  # fmt: skip
    again = plan_pass(evolve_schedule(state, fired), NOW, bounds)
    assert again.fires[0].slot == utc(2020, 1, 1, 0, 6)


def test_latest_over_a_full_scan_misses_the_chunk_and_fires_later() -> None:
    """``latest`` scanning a full chunk misses it (named up to the cap) and fires nothing."""
    due = [utc(2020, 1, 1) + timedelta(minutes=i) for i in range(50)]
    missed, fired = split_due(due, NOW, CatchUp.LATEST, PassBounds(fire_limit=5, scan_limit=50))
    assert missed == due and fired == []


def test_slot_consumed_twice_is_an_illegal_history() -> None:
    """A second ``schedule_fired`` (or miss) of a consumed slot does not fold."""
    state = evolve_schedule(None, added(CatchUp.ALL, utc(2026, 1, 1)))
    slot = utc(2026, 1, 1, 0, 5)
    once = evolve_schedule(
        state,
        ScheduleFired(at=NOW, schedule="s", slot=slot, job_id=_id(), created=True, run_at=slot),
    )
    with pytest.raises(IllegalTransitionError):
        evolve_schedule(
            once,
            ScheduleMissed(
                at=NOW, schedule="s", slots=[slot], count=1, through=slot, policy="none"
            ),
        )
    assert once.status is ScheduleStatus.ACTIVE and once.fired == 1


def test_jitter_is_deterministic_and_within_bounds() -> None:
    """Every process draws the same delay for a slot, in ``[0, jitter)``."""
    slot = utc(2026, 1, 1, 0, 5)
    delays = {jitter("s", slot, 30.0) for _ in range(3)}
    assert len(delays) == 1 and timedelta(0) <= delays.pop() < timedelta(seconds=30)
    assert jitter("s", slot, 0) == timedelta(0)
    assert slot_key("s", slot) == "schedule:s:2026-01-01T00:05:00+00:00"


def _id() -> UUID:
    return uuid4()
