"""The retention reads: :class:`RetentionReader`, what ``reader.retention`` hands out: the
policy, the retention stream's events, and what a run would move now."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from ledger.clock import Clock
from ledger.core.events import Event
from ledger.core.retention import RetentionPolicy
from ledger.retention import retention_runs
from ledger.store.store import Store


class RetentionReader:
    """The retention reads over one store; ``clock`` gives the now a rule is judged at."""

    def __init__(self, store: Store, clock: Clock) -> None:
        self.store = store
        self.clock = clock

    def policy(self) -> RetentionPolicy:
        """The retention policy: its rules, from the retention stream."""
        return retention_runs.policy_of(self.store)

    def events(self) -> list[tuple[int, Event]]:
        """The retention stream's events with their versions (policy changes and runs)."""
        return retention_runs.policy_events(self.store)

    def overview(self, now: datetime | None = None, *, list_limit: int = 20) -> dict[str, Any]:
        """What ``retention show`` prints at ``now`` (the clock's by default): the rules,
        what a run would move and what it must leave (:func:`retention_runs.overview
        <ledger.retention.retention_runs.overview>`)."""
        return retention_runs.overview(self.store, now or self.clock.now(), list_limit=list_limit)
