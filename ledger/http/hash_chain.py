"""``/api/v1/integrity``: the history's hash chain: its head, and its verify as a background
task (docs/integrity.md).

The chain spans every org, so an org-scoped token is refused (403): the head is for any
token of no org (what an operator publishes), the verify (a walk over every event) for an
``admin`` one, run as ``projections/verify`` is (:mod:`ledger.http.verify_tasks`: one at a
time, its result kept for polling)."""

from __future__ import annotations

from typing import Any
from uuid import UUID

from litestar import get, post
from litestar.exceptions import NotFoundException
from litestar.response import Response

from ledger.api.ledger import Ledger
from ledger.api.shaping import plain
from ledger.http.auth import ADMIN, EVERY_ORG
from ledger.http.verify_tasks import VerifyTasks


class IntegrityTasks(VerifyTasks):
    """The chain's verifies (a kind of its own, apart from the projections')."""


def integrity_verify(ledger: Ledger) -> dict[str, Any]:
    """``integrity verify --json``'s object, with ``clean`` (what a task's status reads)."""
    report: dict[str, Any] = plain(ledger.integrity.verify())
    return {"clean": report["ok"], **report}


@get("/integrity", guards=EVERY_ORG, sync_to_thread=True)
def integrity_head(ledger: Ledger) -> dict[str, Any]:
    """Where the chain is: events, position, head, the short digest to publish, events not
    hashed yet, the last checkpoint (``integrity head --json``)."""
    head: dict[str, Any] = plain(ledger.integrity.head())
    return head


@post("/integrity/verify", guards=ADMIN)
async def start_integrity_verify(integrity_tasks: IntegrityTasks) -> Response[dict[str, Any]]:
    """Start verifying the history against its chain: 202 with the task; while one runs, 200
    with the running one."""
    task, started = integrity_tasks.start()
    return Response(plain(task), status_code=202 if started else 200)


@get("/integrity/verify/{task_id:uuid}", guards=ADMIN)
async def integrity_verify_result(integrity_tasks: IntegrityTasks, task_id: UUID) -> dict[str, Any]:
    """A verify task: ``running``, ``ok``, ``differences`` (``report.findings`` names them)
    or ``failed`` (``error``)."""
    task = integrity_tasks.get(task_id)
    if task is None:
        raise NotFoundException(f"no integrity verify task {task_id}")
    shaped: dict[str, Any] = plain(task)
    return shaped
