"""The circuit breaker, one per job type.

``threshold`` consecutive retryable failures of a job type open that type's breaker: the pool
stops claiming jobs *of that type* (others flow on) so that its queued jobs do not burn their
attempts against the same downstream outage. After ``cooldown_s`` the type is half-open: one job of
it is claimed as a probe (:meth:`CircuitBreaker.claimable`), not as many as there are free
slots, so a downstream still down costs one attempt per cooldown, not one per slot. A success
closes the breaker; a retryable failure reopens it at once (the consecutive count is still
at or past the threshold); a probe that ends otherwise (a terminal failure) or never reports
(its lease lost, the pool stopped) lets another probe go after one more cooldown. Permanent
errors are about a job, not about downstream, so they neither count nor reset.

Opening and closing are logged (a warning, an info line); :meth:`CircuitBreaker.open_types`
is what the producer skips and what the pool's health reports. Time is the ledger's clock.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from ledger.clock import Clock

log = logging.getLogger(__name__)

DEFAULT_THRESHOLD = 5
DEFAULT_COOLDOWN_S = 60.0


@dataclass
class _TypeCircuit:
    consecutive: int = 0
    opened_at: datetime | None = None
    """When the breaker last opened (or reopened); ``None`` while closed."""
    probed_at: datetime | None = None
    """When the half-open breaker's probe was claimed; ``None`` while no probe is out."""


class CircuitBreaker:
    """Per-job-type breakers sharing one threshold and cooldown; thread-safe, and may be
    shared by several pools of a process."""

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
        self._circuits: dict[str, _TypeCircuit] = {}
        self._lock = threading.Lock()

    def consecutive_failures(self, job_type: str) -> int:
        with self._lock:
            circuit = self._circuits.get(job_type)
            return circuit.consecutive if circuit is not None else 0

    def is_open(self, job_type: str) -> bool:
        """Open: that type is not claimed. False again once the cooldown has passed."""
        return job_type in self.open_types()

    def open_types(self) -> dict[str, datetime]:
        """Every open type and when its cooldown ends (sorted by type)."""
        now = self._clock.now()
        with self._lock:
            return {
                job_type: circuit.opened_at + self.cooldown
                for job_type, circuit in sorted(self._circuits.items())
                if circuit.opened_at is not None and now < circuit.opened_at + self.cooldown
            }

    def claimable(self, types: Sequence[str]) -> tuple[list[str], list[str]]:
        """Of ``types``: those to claim freely (closed breakers), and the half-open ones to
        claim one probe job of (no probe out, or the last one out for a cooldown already)."""
        now = self._clock.now()
        free: list[str] = []
        probes: list[str] = []
        with self._lock:
            for job_type in types:
                circuit = self._circuits.get(job_type)
                if circuit is None or circuit.opened_at is None:
                    free.append(job_type)
                elif now < circuit.opened_at + self.cooldown:
                    continue  # open
                elif circuit.probed_at is None or now >= circuit.probed_at + self.cooldown:
                    probes.append(job_type)
        return free, probes

    def probe_claimed(self, job_type: str) -> None:
        """A probe job of half-open ``job_type`` was claimed: no other until it reports."""
        now = self._clock.now()
        with self._lock:
            circuit = self._circuits.get(job_type)
            if circuit is not None:
                circuit.probed_at = now

    def record_ended(self, job_type: str) -> None:
        """A job of ``job_type`` ended in a way that says nothing about its downstream (a
        terminal failure): a half-open breaker may send its next probe at once."""
        with self._lock:
            circuit = self._circuits.get(job_type)
            if circuit is not None:
                circuit.probed_at = None

    def record_failure(self, job_type: str) -> None:
        """A retryable failure of ``job_type``: count it, and open (or reopen) at the
        threshold."""
        now = self._clock.now()
        with self._lock:
            circuit = self._circuits.setdefault(job_type, _TypeCircuit())
            circuit.consecutive += 1
            if circuit.consecutive < self.threshold:
                return
            was_open = circuit.opened_at is not None and now < circuit.opened_at + self.cooldown
            circuit.opened_at = now
            circuit.probed_at = None
            count = circuit.consecutive
        if was_open:
            # A job claimed before the breaker opened failed too: the cooldown restarts, but
            # the opening was already logged (one line per opening, not one per failure).
            return
        log.warning(
            "circuit breaker opened for job type %r after %d consecutive retryable failures; "
            "its jobs are not claimed until %s",
            job_type,
            count,
            (now + self.cooldown).isoformat(),
        )

    def record_success(self, job_type: str) -> None:
        """A success of ``job_type`` closes its breaker and clears its count."""
        if job_type not in self._circuits:
            # Nothing to clear (the usual case, once per job): no lock. A failure counted
            # concurrently is ordered after this success either way.
            return
        with self._lock:
            circuit = self._circuits.pop(job_type, None)
        if circuit is not None and circuit.opened_at is not None:
            log.info("circuit breaker closed for job type %r: a job succeeded", job_type)
