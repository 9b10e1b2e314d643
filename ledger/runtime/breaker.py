"""The pool-wide circuit breaker.

N consecutive transient failures open it: the pool stops claiming so that queued jobs do not
burn their attempts against the same downstream outage. After the cooldown it lets work
through again (half-open); a success closes it, and one more transient failure reopens it at
once because the consecutive count is still at or past the threshold. Permanent errors are
about a job, not about downstream, so they neither count nor reset.
"""

from __future__ import annotations

import threading
from datetime import datetime, timedelta

from ledger.clock import Clock

DEFAULT_THRESHOLD = 5
DEFAULT_COOLDOWN_S = 60.0


class CircuitBreaker:
    def __init__(
        self,
        clock: Clock,
        *,
        threshold: int = DEFAULT_THRESHOLD,
        cooldown_s: float = DEFAULT_COOLDOWN_S,
    ) -> None:
        if threshold < 1 or cooldown_s < 0:
            raise ValueError("threshold must be >= 1 and cooldown_s >= 0")
        self._clock = clock
        self.threshold = threshold
        self.cooldown = timedelta(seconds=cooldown_s)
        self._consecutive = 0
        self._opened_at: datetime | None = None
        self._lock = threading.Lock()

    @property
    def consecutive_failures(self) -> int:
        return self._consecutive

    @property
    def is_open(self) -> bool:
        """Open: no claims. False again once the cooldown has passed (a probe may run)."""
        with self._lock:
            opened = self._opened_at
        return opened is not None and self._clock.now() < opened + self.cooldown

    @property
    def reopens_at(self) -> datetime | None:
        """When an open breaker lets a probe through, or ``None`` if it is not open."""
        with self._lock:
            opened = self._opened_at
        if opened is None or self._clock.now() >= opened + self.cooldown:
            return None
        return opened + self.cooldown

    def record_failure(self) -> None:
        """A transient failure: count it, and open (or reopen) at the threshold."""
        with self._lock:
            self._consecutive += 1
            if self._consecutive >= self.threshold:
                self._opened_at = self._clock.now()

    def record_success(self) -> None:
        """Any success closes the breaker and clears the count."""
        with self._lock:
            self._consecutive = 0
            self._opened_at = None
