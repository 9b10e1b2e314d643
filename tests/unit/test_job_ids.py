"""Job ids drawn in bulk (ledger/api/job_ids.py): what uuid4() would give, many at once."""

from __future__ import annotations

from uuid import RFC_4122, UUID

import pytest

from ledger.api.job_ids import random_uuids


@pytest.mark.parametrize("n", [0, 1, 15, 16, 5000, 70_000])
def test_bulk_ids_are_distinct_version_4_uuids(n: int) -> None:
    """Any count (past msgpack's 16-bit array length too) gives n distinct v4 RFC 4122 ids."""
    ids = random_uuids(n)
    assert len(ids) == n == len(set(ids))
    assert all(type(i) is UUID and i.version == 4 and i.variant == RFC_4122 for i in ids)


def test_bulk_ids_keep_122_random_bits() -> None:
    """Only the version and variant bits are fixed: every other bit takes both values."""
    ids = random_uuids(2000)
    fixed = (0xF << 76) | (0x3 << 62)
    ones = 0
    zeros = 0
    for i in ids:
        ones |= i.int
        zeros |= ~i.int & (2**128 - 1)
    assert ones & zeros & ~fixed == (2**128 - 1) & ~fixed
    assert all(i.int & fixed == (0x4 << 76) | (0x2 << 62) for i in ids)


def test_bulk_ids_round_trip_as_uuids() -> None:
    """A bulk id is a plain UUID: equal to and hashed as its parsed text."""
    for i in random_uuids(10):
        assert UUID(str(i)) == i and hash(UUID(str(i))) == hash(i)
        assert UUID(bytes=i.bytes) == i
