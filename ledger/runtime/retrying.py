"""Retrying a worker's fenced write through errors that may pass.

A connection dropped, a server restarting, a lock or serialisation conflict: each may be
gone a moment later, and every worker write is fenced by its lease, so trying it again is
safe (a try whose acknowledgement was lost and that did commit makes the next one either
refused by the fence or, for progress and heartbeats, recorded twice with the same values).
The completer retries its batches this way; :func:`written` does it for one write a handler
asked for (``ctx.progress``, ``ctx.heartbeat``), so a blip of the database does not fail a
handler that was doing fine.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import TypeVar

from ledger.clock import Clock
from ledger.core.errors import ConcurrencyConflictError, DatabaseBusyError, DatabaseUnusableError

log = logging.getLogger(__name__)

T = TypeVar("T")

PASSING_ERRORS = (DatabaseBusyError, ConcurrencyConflictError, DatabaseUnusableError)
"""The errors a later try may not meet (the others — a refusal, a bug — it would meet again)."""
RETRY_FIRST_DELAY_S = 0.05
"""The first retry's delay; each further one doubles it, up to :data:`RETRY_MAX_DELAY_S`."""
RETRY_MAX_DELAY_S = 2.0
"""The longest wait between two tries (a server back from a restart is found within it)."""
TRIES_PER_LEASE = 8
"""At least this many tries fit in one lease: with short leases the wait between two is
capped at a lease / 8, so a server back with a fraction of the lease left is still met."""


def retry_delay(failed_tries: int, *, first_s: float, max_s: float) -> float:
    """Seconds to wait after ``failed_tries`` failed tries: exponential, capped, and
    jittered down by up to half (so the workers of a fleet do not retry in step)."""
    ceiling: float = min(max_s, first_s * 2.0 ** (failed_tries - 1))
    return ceiling * random.uniform(0.5, 1.0)


def longest_wait(lease: timedelta, max_s: float = RETRY_MAX_DELAY_S) -> float:
    """The cap of the wait between two tries of a write under a lease this long."""
    return min(max_s, lease.total_seconds() / TRIES_PER_LEASE)


async def written(
    write: Callable[[], Awaitable[T]], *, what: str, clock: Clock, lease: timedelta
) -> T:
    """``await write()``, tried again through :data:`PASSING_ERRORS` for as long as the
    lease it writes under may be live (``lease`` from now); then its last error is raised."""
    give_up_at = clock.now() + lease
    failed_tries = 0
    while True:
        try:
            return await write()
        except PASSING_ERRORS as exc:
            failed_tries += 1
            if clock.now() >= give_up_at:
                raise
            cap = longest_wait(lease)
            delay = retry_delay(failed_tries, first_s=RETRY_FIRST_DELAY_S, max_s=cap)
            log.warning("%s failed (try %d; again in %.2f s): %s", what, failed_tries, delay, exc)
            await asyncio.sleep(delay)
