"""The integrity checkpoints' kind: a stream no view folds and no audit row shows (the
checkpoints are read from their events by ``jobledger integrity``)."""

from __future__ import annotations

from uuid import UUID

from ledger.core.integrity_checkpoints import INTEGRITY_EVENTS
from ledger.views.kind import StateKind, StreamVersion, count_event, version_of_row

KIND: StateKind[UUID, StreamVersion] = StateKind(
    "integrity",
    INTEGRITY_EVENTS,
    count_event,
    lambda stream_id: stream_id,
    of_row=version_of_row,
    get="stream_version",
    key_param="stream_id",
    binds_id=True,
)
"""The checkpoints' stream (:data:`~ledger.core.integrity_checkpoints.INTEGRITY_STREAM_ID`), by
stream id: its state is only its version, read from the events table."""
