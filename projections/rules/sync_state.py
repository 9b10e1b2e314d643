"""The sync-state view: per ``(source_id, uri)``, what was last ingested from a source.

Rules (haiku's semantics), all driven by ``job_succeeded`` of a job with a sync subject:

- an ``upsert`` records the *result's* revision and content hash (what the handler returned,
  not what the job asked for); a value the result leaves out keeps the stored one — an upsert
  never erases;
- a ``delete`` removes the row.

The revision snapshot of a source is ``{uri: revision}`` for rows that have a revision; its
known URIs are every row's.
"""

from __future__ import annotations

from datetime import datetime

import msgspec

from ledger.core.events import JobEvent, JobSucceeded, SubjectOp
from ledger.core.state import JobState
from ledger.core.times import to_us
from projections.rules.writes import ViewWrite


class SyncState(msgspec.Struct, frozen=True):
    """One row of the view."""

    source_id: str
    uri: str
    revision: str | None
    content_hash: str | None
    last_seen_at: datetime
    last_ingested_at: datetime


def writes(event: JobEvent, state: JobState) -> list[ViewWrite]:
    """The sync-state writes ``event`` causes, given the job's state after it."""
    subject = state.subject
    if subject is None or not isinstance(event, JobSucceeded):
        return []
    key = {"source_id": subject.source_id, "uri": subject.uri}
    if subject.op is SubjectOp.DELETE:
        return [ViewWrite("sync_state_delete", key)]
    at = to_us(event.at)
    return [
        ViewWrite(
            "sync_state_upsert",
            {
                **key,
                "revision": event.revision,
                "content_hash": event.content_hash,
                "last_seen_at": at,
                "last_ingested_at": at,
            },
        )
    ]
