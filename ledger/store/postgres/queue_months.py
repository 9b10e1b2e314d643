"""Which month partition of the job view a batch of jobs lives in: what the pool's write names.

A statement on the partitioned ``jl_queue`` pays for every month attached, whatever rows it
touches. Planned afresh it plans them all; kept as a generic plan, PostgreSQL 15 locks every
partition (and each one's indexes) before it prunes the months it does not need. The pool's
one-statement write (:mod:`ledger.store.postgres.unread_appends`) nearly always carries jobs
of one month, the current one, so it names that month's partition instead of the parent
(measured at 17 partitions: 1.11 → 0.84 ms a call of 10 jobs; bench/README.md).

That is exact because the bounds are: a month partition holds the job ids from its month's
first millisecond's smallest UUID up to the next month's (:func:`partitions.uuid_of_ms`), so
an id's first 48 bits, read as milliseconds, name its month, whatever version the UUID is;
and once a month's partition is attached no row of that range can be anywhere else. Which
months are attached is cached here and looked up again when a batch's month is not among
them (at most every :data:`LOOK_AGAIN_S`: another process may have made it); a name that
has gone (retention archived the month since) is forgotten on the error it raises, and the
write runs on the parent. A batch of jobs from several months, or of ids past the year 9999,
runs on the parent as before.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from uuid import UUID

from ledger.store.postgres.partitions import month_start_ms
from ledger.store.postgres.view_partitions import DEFAULT_SUFFIX
from ledger.views.queue import PROJECTION as QUEUE

LOOK_AGAIN_S = 30.0
"""The least time between two lookups of the attached months caused by a month not known."""

_MS_SHIFT = 80
"""A UUID's first 48 bits (a version-7 id's milliseconds) are its top bits of 128."""


def _month_range(ms: int) -> tuple[str, int, int] | None:
    """The ``jl_queue`` month partition whose range holds millisecond ``ms`` (whether or not
    it exists) and that month's bounds in ms; ``None`` past the year 9999."""
    try:
        at = datetime.fromtimestamp(ms / 1000, UTC)
    except (OverflowError, ValueError, OSError):
        return None
    year, month = at.year, at.month
    after = (year + 1, 1) if month == 12 else (year, month + 1)
    if after[0] > 9999:
        return None
    name = f"{QUEUE.table}_p{year:04d}{month:02d}"
    return name, month_start_ms(year, month), month_start_ms(*after)


def month_partition(job_id: UUID) -> str | None:
    """The name of the ``jl_queue`` month partition whose range holds ``job_id`` (whether or
    not it exists), ``None`` for an id whose first 48 bits are past the year 9999."""
    found = _month_range(job_id.int >> _MS_SHIFT)
    return found[0] if found is not None else None


class QueueMonths:
    """The attached month partitions of ``jl_queue``, as last looked up (``look_up``: a
    function that returns their names now; an empty list if the table is not partitioned;
    ``monotonic``: the seconds the lookups are spaced by)."""

    def __init__(
        self, look_up: Callable[[], Iterable[str]], monotonic: Callable[[], float] = time.monotonic
    ) -> None:
        self._look_up = look_up
        self._monotonic = monotonic
        self._attached: frozenset[str] | None = None
        self._looked_at = -LOOK_AGAIN_S
        self._lock = threading.Lock()

    def partition_of(self, job_ids: Iterable[UUID]) -> str | None:
        """The one attached month partition holding all of ``job_ids``, or ``None`` (several
        months, or one with no partition of its own: its rows are in the default one)."""
        ids = iter(job_ids)
        first = next(ids, None)
        found = None if first is None else _month_range(first.int >> _MS_SHIFT)
        if found is None:
            return None
        # The others compared as integers: a date per id cost ~0.8 µs, twice a job.
        name, low, high = found
        if any(not low <= job_id.int >> _MS_SHIFT < high for job_id in ids):
            return None
        attached = self._attached
        if attached is None or (name not in attached and self._may_look_again()):
            attached = self._refresh()
        return name if name in attached else None

    def forget(self, name: str) -> None:
        """``name`` is no longer attached (a statement naming it failed)."""
        with self._lock:
            if self._attached is not None:
                self._attached = self._attached - {name}

    def _may_look_again(self) -> bool:
        return self._monotonic() - self._looked_at >= LOOK_AGAIN_S

    def _refresh(self) -> frozenset[str]:
        names = frozenset(n for n in self._look_up() if not n.endswith(DEFAULT_SUFFIX))
        with self._lock:
            self._attached = names
            self._looked_at = self._monotonic()
        return names
