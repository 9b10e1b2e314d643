"""``/api/v1``'s writes that span orgs or many jobs: a job type's enable/disable (``admin``,
no org) and the dead letters of a type requeued (``operate``, held to the token's org).
Each event names the token: ``job_type_updated``'s ``actor``, ``job_requeued``'s reason."""

from __future__ import annotations

from typing import Any

import msgspec
from litestar import post

from ledger.api.ledger import Ledger
from ledger.api.shaping import plain
from ledger.core.errors import InvalidRequestError, LedgerError
from ledger.core.tokens import TokenState
from ledger.http.auth import ADMIN, OPERATE, actor, scoped_org

MAX_REQUEUE = 10_000
"""The most dead jobs one requeue-by-type request takes (oldest death first)."""


def _set_enabled(ledger: Ledger, caller: TokenState, job_type: str, enabled: bool) -> Any:
    return plain(ledger.set_enabled(job_type, enabled, actor=actor(caller)))


@post("/definitions/{job_type:str}/enable", guards=ADMIN, sync_to_thread=True, status_code=200)
def enable_type(ledger: Ledger, caller: TokenState, job_type: str) -> dict[str, Any]:
    """Enable a job type (``job_type_updated`` naming the token; nothing if it was)."""
    definition: dict[str, Any] = _set_enabled(ledger, caller, job_type, True)
    return definition


@post("/definitions/{job_type:str}/disable", guards=ADMIN, sync_to_thread=True, status_code=200)
def disable_type(ledger: Ledger, caller: TokenState, job_type: str) -> dict[str, Any]:
    """Disable a job type: its enqueues are refused, its jobs stay (as ``jobledger
    disable``)."""
    definition: dict[str, Any] = _set_enabled(ledger, caller, job_type, False)
    return definition


class RequeueByType(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    type: str
    org: str | None = None
    limit: int | None = None
    reason: str | None = None


@post("/dead-letters/requeue", guards=OPERATE, sync_to_thread=True, status_code=200)
def requeue_dead_letters(ledger: Ledger, caller: TokenState, data: RequeueByType) -> dict[str, Any]:
    """Requeue the dead jobs of one type (of the token's org; of ``org`` for a token of
    none), oldest death first, at most ``limit``: each its own ``job_requeued``, so one
    refusal (its subject has another live job) stops no other; the requeued and refused
    are listed."""
    if data.limit is not None and not 1 <= data.limit <= MAX_REQUEUE:
        raise InvalidRequestError(f"limit must be 1 to {MAX_REQUEUE}, not {data.limit}")
    letters = ledger.dead_letters(data.type, org=scoped_org(caller, data.org))
    reason = f"{actor(caller)}: {data.reason or 'requeued by type over the API'}"
    requeued: list[str] = []
    refused: list[dict[str, str]] = []
    for letter in letters[: data.limit or MAX_REQUEUE]:
        try:
            ledger.requeue(letter.job_id, reason=reason)
        except LedgerError as error:
            refused.append({"job_id": str(letter.job_id), "code": error.code})
        else:
            requeued.append(str(letter.job_id))
    return {"requeued": len(requeued), "job_ids": requeued, "refused": refused}
