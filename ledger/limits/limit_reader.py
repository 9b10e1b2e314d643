"""The limit reads: :class:`LimitReader`, what ``reader.limits`` hands out: the queues and
their pauses, the concurrency limits with the leases they count, the rate buckets."""

from __future__ import annotations

from ledger.clock import Clock
from ledger.core.concurrency import LimitUse
from ledger.limits import limit_reads
from ledger.limits.queue_commands import QueueSummary, queue_summaries
from ledger.store.store import Store
from ledger.views.rate_buckets import RateBucket


class LimitReader:
    """The limit reads over one store."""

    def __init__(self, store: Store, clock: Clock) -> None:
        self.store = store
        self.clock = clock

    def queues(self) -> list[QueueSummary]:
        """Every queue with live jobs or a pause history, by name: pending and leased counts
        and whether (by whom, why) it is paused."""
        return queue_summaries(self.store)

    def concurrency(self) -> list[LimitUse]:
        """Every concurrency limit and the live leases it counts now (``jobledger stats``)."""
        return limit_reads.concurrency_limits(self.store)

    def rate_buckets(self) -> list[RateBucket]:
        """Every rate-limit key's token bucket (the rate-bucket view)."""
        return self.store.rate_buckets()
