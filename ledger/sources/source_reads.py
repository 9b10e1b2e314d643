"""Sources as the operator surfaces show them (``jobledger sources``, ``GET
/api/v1/sources``): the sync-state summary of each source with its last poll, that poll's
result and the source's breaker, shaped once here for the CLI and the HTTP API alike."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from ledger.core.plain import plain
from ledger.core.source_polls.state import SourcePollState
from ledger.views.sync_state import Source


def poll_view(state: SourcePollState, now: datetime) -> dict[str, Any]:
    """A source's polls as JSON: the last poll (when, how it ended, the last success's
    counts or the last error), the breaker at ``now`` and the last skip's reason."""
    return {
        "last_poll_at": plain(state.last_poll_at),
        "result": state.last_result.value,
        "counts": None if state.last_counts is None else plain(state.last_counts),
        "last_success_at": plain(state.last_success_at),
        "error": state.last_error,
        "error_code": state.last_error_code,
        "failures": state.failures,
        "breaker": state.breaker(now).value,
        "breaker_until": plain(state.breaker_until),
        "skip_reason": state.last_skip_reason,
        "skip_code": state.last_skip_code,
        "polls": state.polls,
    }


def source_views(
    sources: Sequence[Source],
    polls: Mapping[str, SourcePollState],
    now: datetime,
    *,
    polled_only_too: bool,
) -> list[dict[str, Any]]:
    """Each source's summary with a ``poll`` member (``None``: never polled), by source id.

    ``polled_only_too`` adds the sources that were polled but have neither sync state nor
    jobs yet (an org-scoped caller does not get them: a source's polls belong to no org)."""
    found: dict[str, dict[str, Any]] = {source.source_id: plain(source) for source in sources}
    if polled_only_too:
        for name in polls:
            found.setdefault(
                name, plain(Source(source_id=name, uris=0, last_ingested_at=None, jobs={}))
            )
    for name, view in found.items():
        state = polls.get(name)
        view["poll"] = None if state is None else poll_view(state, now)
    return [found[name] for name in sorted(found)]
