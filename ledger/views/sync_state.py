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

from collections.abc import Collection
from datetime import datetime

import msgspec

from ledger.core.events import JobEvent, JobSucceeded
from ledger.core.state import JobState
from ledger.core.times import to_us
from ledger.core.values import SubjectOp
from ledger.views.view import Key, MemoryTable, Params, Projection, WrittenView
from ledger.views.writes import ViewWrite

PROJECTION = Projection(
    "sync_state",
    1,
    "jl_sync_state",
    ("source_id", "uri"),
    ("source_id", "uri", "revision", "content_hash", "last_seen_at", "last_ingested_at"),
    "schema_sync_state",
    (JobSucceeded.name,),
    description="one row per (source_id, uri): what was last ingested",
)


class SyncState(msgspec.Struct, frozen=True):
    """One row of the view."""

    source_id: str
    uri: str
    revision: str | None
    content_hash: str | None
    last_seen_at: datetime
    last_ingested_at: datetime


class Source(msgspec.Struct):
    """One source as the sources read sums it up: its URIs in the view, when it last
    ingested one, and its jobs (those with a sync subject of it) by status."""

    source_id: str
    uris: int
    last_ingested_at: datetime | None
    jobs: dict[str, int]


def writes(event: JobEvent, state: JobState) -> list[ViewWrite]:
    """The sync-state writes ``event`` causes, given the job's state after it."""
    subject = state.subject
    if subject is None or not isinstance(event, JobSucceeded):
        return []
    key = {"source_id": subject.source_id, "uri": subject.uri}
    if subject.op is SubjectOp.DELETE:
        return [ViewWrite(DELETE, key)]
    at = to_us(event.at)
    return [
        ViewWrite(
            UPSERT,
            {
                **key,
                "revision": event.revision,
                "content_hash": event.content_hash,
                "last_seen_at": at,
                "last_ingested_at": at,
            },
        )
    ]


# --- the named writes (ledger/store/sql/<backend>.sql) and their in-memory twins -----------

UPSERT = "sync_state_upsert"
DELETE = "sync_state_delete"


def _apply_upsert(table: MemoryTable, params: Params) -> Collection[Key]:
    """``INSERT … ON CONFLICT (source_id, uri) DO UPDATE``: ``revision`` and
    ``content_hash`` become ``coalesce(new, stored)`` (an upsert never erases), the two times
    are replaced."""
    key = (params["source_id"], params["uri"])
    row = dict(params)
    stored = table.rows.get(key)
    if stored is not None:
        for column in ("revision", "content_hash"):
            if row[column] is None:
                row[column] = stored[column]
    table.rows[key] = row
    return (key,)


def _apply_delete(table: MemoryTable, params: Params) -> Collection[Key]:
    """``DELETE`` by primary key."""
    key = (params["source_id"], params["uri"])
    table.rows.pop(key, None)
    return (key,)


VIEW = WrittenView(
    projection=PROJECTION,
    writes=writes,
    applies={UPSERT: _apply_upsert, DELETE: _apply_delete},
    new_table=MemoryTable,
    events=(JobSucceeded,),
)
