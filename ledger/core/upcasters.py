"""The upcasters of jobledger's own events: how a stored older version reads as the current one.

Each takes the stored field map of ``name.v<n>`` and returns the map of ``name.v<n+1>``
(:class:`ledger.codec.EventCodec` chains them). Pure: field maps in, field maps out. Every
entry here has its version's fields and its reason in ``docs/events.md``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Upcaster = Callable[[dict[str, Any]], dict[str, Any]]


def retry_scheduled_v1_to_v2(fields: dict[str, Any]) -> dict[str, Any]:
    """v1 did not record the failure's ``not_before``: read it as ``next_run_at``, so a v1
    retry later than the policy's bounds counts as asked for (what v1 could not tell apart)."""
    return {**fields, "not_before": fields["next_run_at"]}


def enqueued_v1_to_v2(fields: dict[str, Any]) -> dict[str, Any]:
    """v1 had no workflow link: a v1 job was enqueued by a caller, so it runs no step."""
    return {**fields, "workflow": None}


UPCASTERS: dict[tuple[str, int], Upcaster] = {
    ("job_retry_scheduled", 1): retry_scheduled_v1_to_v2,
    ("job_enqueued", 1): enqueued_v1_to_v2,
}
"""``(event name, from version)`` → the upcaster to the next version."""
