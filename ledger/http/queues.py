"""``/api/v1/queues``: pause and resume a named queue. A queue spans orgs (its jobs are any
org's), so it takes a token of no org: an ``admin`` one (``operate`` tokens are always held
to an org). The ``queue_paused`` / ``queue_resumed`` event names the token as its ``actor``."""

from __future__ import annotations

from typing import Any

from litestar import post

from ledger.api.ledger import Ledger
from ledger.api.shaping import plain
from ledger.core.tokens import TokenState
from ledger.http.auth import ADMIN, actor
from ledger.http.jobs import Reason

QUEUE_WRITE = ADMIN


def _set(ledger: Ledger, caller: TokenState, queue: str, body: Reason | None, pause: bool) -> Any:
    reason = body.reason if body is not None and body.reason else None
    limits = ledger.limits
    if pause:
        limits.pause_queue(queue, reason=reason or "paused over the API", actor=actor(caller))
    else:
        limits.resume_queue(queue, reason=reason or "resumed over the API", actor=actor(caller))
    found = next((q for q in limits.queues() if q.queue == queue), None)
    return plain(found) if found is not None else {"queue": queue, "paused": False}


@post("/queues/{queue:str}/pause", guards=QUEUE_WRITE, sync_to_thread=True, status_code=200)
def pause_queue(
    ledger: Ledger, caller: TokenState, queue: str, data: Reason | None = None
) -> dict[str, Any]:
    """Stop claiming the queue's jobs (nothing appended if it is paused already)."""
    shaped: dict[str, Any] = _set(ledger, caller, queue, data, True)
    return shaped


@post("/queues/{queue:str}/resume", guards=QUEUE_WRITE, sync_to_thread=True, status_code=200)
def resume_queue(
    ledger: Ledger, caller: TokenState, queue: str, data: Reason | None = None
) -> dict[str, Any]:
    """Claim the queue's jobs again (nothing appended if it is not paused)."""
    shaped: dict[str, Any] = _set(ledger, caller, queue, data, False)
    return shaped
