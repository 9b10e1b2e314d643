"""``/api/v1/sources``: the sync-state view by source with each source's last poll and
breaker (``jobledger sources --json``'s shape), and one source's rows per URI (the
``sync-state`` command's shape).

The view has no org: its rows are keyed by ``(source, uri)`` whichever org's jobs synced
them. An org-scoped token sees only the subjects every job of which (in the queue view) is
of its org, so a row another org's job also wrote is never shown to either org's token;
jobs are counted of its org only. A source it sees nothing of is 404. A source's polls belong
to no org: an org-scoped token sees the ``poll`` of the sources it sees, and never a source
that was polled but has nothing of its org."""

from __future__ import annotations

from typing import Any

from litestar import get

from ledger.api.ledger import Ledger
from ledger.api.shaping import plain
from ledger.core.errors import SourceNotFoundError
from ledger.core.tokens import TokenState
from ledger.http.auth import scoped_org


@get("/sources", sync_to_thread=True)
def sources(ledger: Ledger, caller: TokenState, org: str | None = None) -> list[dict[str, Any]]:
    """Each source: its URIs in the sync state, last ingestion, its jobs by status, and its
    last poll and breaker (``poll``, ``null`` if never polled)."""
    return ledger.sources.overview(org=scoped_org(caller, org))


@get("/sources/{source_id:str}", sync_to_thread=True)
def source(
    ledger: Ledger, caller: TokenState, source_id: str, org: str | None = None
) -> dict[str, Any]:
    """One source's summary and its sync state per URI (``sync-state --json``'s rows)."""
    scope = scoped_org(caller, org)
    summary = ledger.sources.overview(org=scope, source_id=source_id)
    if not summary:
        raise SourceNotFoundError(f"no source {source_id!r}")
    rows = (
        ledger.sources.sync_state(source_id)
        if scope is None
        else ledger.sources.sync_state_of_org(source_id, scope)
    )
    return {**summary[0], "rows": [plain(row) for row in rows]}
