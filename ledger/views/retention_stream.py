"""The retention stream's kind: a stream no view folds (its policy is read from its events),
whose events have audit rows."""

from __future__ import annotations

from uuid import UUID

from ledger.core.retention import RETENTION_EVENTS
from ledger.views.audit import RETENTION_ORIGIN
from ledger.views.kind import StateKind, StreamVersion, count_event, version_of_row

KIND: StateKind[UUID, StreamVersion] = StateKind(
    "retention",
    RETENTION_EVENTS,
    count_event,
    lambda stream_id: stream_id,
    of_row=version_of_row,
    get="stream_version",
    key_param="stream_id",
    binds_id=True,
    origin=lambda state, event: RETENTION_ORIGIN,
)
"""The retention stream (:data:`~ledger.core.retention.RETENTION_STREAM_ID`), by stream id:
its state is only its version, read from the events table."""
