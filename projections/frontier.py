"""Waiting for the final prefix of the history to reach what had committed.

A tailing reader reads only final events: those of transactions older than every transaction
of the server still in flight (docs/architecture.md, "The order tailing readers rely on").
A reader that must hold *everything committed so far* (``Ledger.catch_up``, a rebuild about
to record a tracked view's position) first waits for that frontier to pass the transactions
that had committed when it started. Writers' transactions last milliseconds; a long one (a
frozen writer, another application's batch job on the same server) holds every tailing
reader back for as long, so the wait is bounded and the reader then goes on with what is
final (nothing is lost: the rest is read later).
"""

from __future__ import annotations

import logging
import time

from ledger.store.store import Store

log = logging.getLogger("jobledger.projections")

FIRST_PAUSE_S = 0.002
"""The first pause between two looks at the frontier (it doubles, up to ``MAX_PAUSE_S``)."""
MAX_PAUSE_S = 0.1


def wait_final(store: Store, wait_s: float) -> bool:
    """Wait (up to ``wait_s`` seconds, polling) until every transaction that had committed
    when this was called is final; whether it is. Returns at once on SQLite."""
    with store.read_snapshot() as snapshot:
        target = snapshot.frontier().next_transaction_id
    deadline = time.monotonic() + wait_s
    pause = FIRST_PAUSE_S
    while True:
        with store.read_snapshot() as snapshot:
            snapshot.prime_frontier()
            if snapshot.frontier().oldest_in_flight >= target:
                return True
        if time.monotonic() >= deadline:
            log.warning("transactions older than %d still in flight after %.1f s", target, wait_s)
            return False
        time.sleep(pause)  # another session's transaction, usually a short one
        pause = min(pause * 2, MAX_PAUSE_S)
