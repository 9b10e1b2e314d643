"""The concurrency limits' pure parts: the definition's stored form, room, blockers."""

from __future__ import annotations

from datetime import UTC, datetime
from uuid import uuid4

import msgspec

from ledger.core.blockers import concurrency_blockers
from ledger.core.concurrency import Room, admit, limits_of, lock_keys
from ledger.core.state import JobState
from ledger.core.values import EnqueueRequest, JobDefinition

# A definition's stored bytes from before the limits existed: they must not change.
_BEFORE = (
    b"\x87\xa8job_type\xa1x\xa7version\x01\xacmax_attempts\x08\xb1default_timeout_s"
    b"\xcb@\x8c \x00\x00\x00\x00\x00\xb0default_priorityd\xa7enabled\xc3\xa7backoff"
    b"\x83\xa6base_s\xcb@\x00\x00\x00\x00\x00\x00\x00\xa5max_s\xcb@\xac \x00\x00\x00\x00"
    b"\x00\xa6jitter\xcb?\xd0\x00\x00\x00\x00\x00\x00"
)


def _pending(job_type: str, org: str | None = None) -> JobState:
    now = datetime(2026, 1, 1, tzinfo=UTC)
    request = EnqueueRequest(job_type=job_type, org=org)
    backoff = JobDefinition(job_type=job_type).backoff
    return JobState(uuid4(), request, 1, 100, 8, 900.0, backoff, now, now, now, 1)


def test_a_definition_without_limits_is_stored_as_before() -> None:
    """Unset limits are left out of the stored map: old definitions' bytes are unchanged,
    and they decode with no limits."""
    assert msgspec.msgpack.encode(JobDefinition(job_type="x")) == _BEFORE
    decoded = msgspec.msgpack.decode(_BEFORE, type=JobDefinition)
    assert limits_of(decoded) is None
    limited = JobDefinition(job_type="x", concurrency=2)
    assert msgspec.msgpack.decode(msgspec.msgpack.encode(limited), type=JobDefinition) == limited


def test_room_admits_in_order_within_type_org_and_resource_limits() -> None:
    """Each admitted job takes its room; a job whose key is full is refused."""
    limits = {
        "a": limits_of(JobDefinition(job_type="a", per_org_concurrency=1)),
        "b": limits_of(JobDefinition(job_type="b", resource="db", resource_limit=2)),
        "c": limits_of(JobDefinition(job_type="c", resource="db", resource_limit=5)),
    }
    room = Room({k: v for k, v in limits.items() if v is not None}, {("c", ""): 1})
    jobs = [_pending("a", "x"), _pending("a", "x"), _pending("a", "y"), _pending("b")]
    jobs += [_pending("c"), _pending("u")]
    admitted, refused = admit(jobs, room)
    assert refused
    assert admitted == [jobs[0], jobs[2], jobs[3], jobs[5]]  # db's limit is the smallest, 2
    assert room.full_types() == {"b", "c"}
    assert room.full_orgs() == {("a", "x"), ("a", "y")}


def test_lock_keys_are_sorted_and_cover_resources() -> None:
    """One order everywhere: type keys and resource keys, sorted."""
    b = limits_of(JobDefinition(job_type="b", resource="db", resource_limit=2))
    a = limits_of(JobDefinition(job_type="a", concurrency=1))
    assert b is not None and a is not None
    assert lock_keys([b, a]) == ["resource:db", "type:a", "type:b"]


def test_blockers_name_the_limit_reached() -> None:
    """A pending job at its resource limit says which, and how many leases hold it."""
    limits = limits_of(JobDefinition(job_type="b", resource="db", resource_limit=1))
    assert limits is not None
    room = Room({"b": limits}, {("b", ""): 1})
    [blocker] = concurrency_blockers(_pending("b"), limits, room)
    assert (blocker.reason, blocker.message) == (
        "resource_limit",
        "resource limit 1 of db reached (1 leased)",
    )
    assert concurrency_blockers(_pending("b"), limits, Room({"b": limits}, {})) == []
