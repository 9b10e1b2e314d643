"""Job ids drawn in bulk (ledger/jobs/job_ids.py): version-7 ids of one timestamp, many at
once."""

from __future__ import annotations

from uuid import RFC_4122, UUID

import pytest

from ledger.jobs.job_ids import random_uuids

AT_MS = 1_767_225_600_000  # 2026-01-01T00:00:00Z


@pytest.mark.parametrize("n", [0, 1, 15, 16, 5000, 70_000])
def test_bulk_ids_are_distinct_version_7_uuids(n: int) -> None:
    """Any count (past msgpack's 16-bit array length too) gives n distinct v7 RFC 4122 ids."""
    ids = random_uuids(n, AT_MS)
    assert len(ids) == n == len(set(ids))
    assert all(type(i) is UUID and i.version == 7 and i.variant == RFC_4122 for i in ids)


def test_bulk_ids_carry_their_time_first() -> None:
    """The first 48 bits are the milliseconds given, so ids order by enqueue time."""
    early = random_uuids(100, AT_MS)
    late = random_uuids(100, AT_MS + 1)
    assert {i.int >> 80 for i in early} == {AT_MS}
    assert max(early) < min(late)


def test_bulk_ids_keep_74_random_bits() -> None:
    """Only the time, version and variant bits are fixed: every other bit takes both values."""
    ids = random_uuids(2000, AT_MS)
    fixed = (0xFFFF_FFFF_FFFF << 80) | (0xF << 76) | (0x3 << 62)
    ones = 0
    zeros = 0
    for i in ids:
        ones |= i.int
        zeros |= ~i.int & (2**128 - 1)
    assert ones & zeros & ~fixed == (2**128 - 1) & ~fixed
    assert all(i.int & fixed == (AT_MS << 80) | (0x7 << 76) | (0x2 << 62) for i in ids)


def test_bulk_ids_round_trip_as_uuids() -> None:
    """A bulk id is a plain UUID: equal to and hashed as its parsed text."""
    for i in random_uuids(10):
        assert UUID(str(i)) == i and hash(UUID(str(i))) == hash(i)
        assert UUID(bytes=i.bytes) == i
