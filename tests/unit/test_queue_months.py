"""Naming the job view's month partition for a batch (ledger.store.postgres.queue_months)."""

from __future__ import annotations

import uuid
from collections.abc import Iterable

from ledger.store.postgres.partitions import month_start_ms, uuid_of_ms
from ledger.store.postgres.queue_months import LOOK_AGAIN_S, QueueMonths, month_partition


def _id_at(ms: int, rest: int = 0) -> uuid.UUID:
    return uuid.UUID(int=(ms << 80) | rest)


def test_an_id_names_the_month_its_first_48_bits_fall_in_as_the_bounds_do() -> None:
    december, january = month_start_ms(2026, 12), month_start_ms(2027, 1)
    assert month_partition(uuid.UUID(uuid_of_ms(december))) == "jl_queue_p202612"  # the bound
    assert month_partition(_id_at(january - 1, (1 << 80) - 1)) == "jl_queue_p202612"
    assert month_partition(_id_at(january)) == "jl_queue_p202701"
    assert month_partition(uuid.UUID(int=(1 << 128) - 1)) is None  # past the year 9999


class _Catalog:
    """The attached partitions as a database would list them, counting the lookups."""

    def __init__(self, names: Iterable[str]) -> None:
        self.names = list(names)
        self.lookups = 0

    def __call__(self) -> list[str]:
        self.lookups += 1
        return list(self.names)


def test_one_attached_month_is_named_and_anything_else_goes_to_the_parent() -> None:
    catalog = _Catalog(["jl_queue_p202612", "jl_queue_p202701", "jl_queue_default"])
    months = QueueMonths(catalog)
    december = month_start_ms(2026, 12)
    january = month_start_ms(2027, 1)
    assert months.partition_of([_id_at(december + 5), _id_at(december + 9)]) == "jl_queue_p202612"
    assert months.partition_of([_id_at(december), _id_at(january)]) is None  # two months
    assert months.partition_of([_id_at(month_start_ms(2026, 11))]) is None  # in the default
    assert catalog.lookups == 1  # a month not attached is not looked up again at once


def test_a_month_made_since_is_found_once_a_lookup_is_due() -> None:
    now = [1000.0]
    catalog = _Catalog(["jl_queue_p202612"])
    months = QueueMonths(catalog, monotonic=lambda: now[0])
    february = [_id_at(month_start_ms(2027, 2) + 1)]
    assert months.partition_of(february) is None
    catalog.names.append("jl_queue_p202702")  # another process made it
    assert months.partition_of(february) is None  # not due yet
    now[0] += LOOK_AGAIN_S
    assert months.partition_of(february) == "jl_queue_p202702"
    months.forget("jl_queue_p202702")  # archived since: a statement naming it failed
    assert months.partition_of(february) is None
    assert catalog.lookups == 2
