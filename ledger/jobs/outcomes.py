"""What worker writes report and return: one attempt's outcome, and a batch write's result."""

from __future__ import annotations

from datetime import datetime
from uuid import UUID

import msgspec

from ledger.core.errors import LedgerError
from ledger.core.state import JobState, Lease
from ledger.core.values import JSON, Failure


class Completion(msgspec.Struct, frozen=True):
    """One successful attempt to record in :meth:`Ledger.succeed_many`."""

    lease: Lease
    output: JSON | None = None
    revision: str | None = None
    content_hash: str | None = None


class FailureReport(msgspec.Struct, frozen=True):
    """One failed attempt to record in :meth:`Ledger.finish_many`."""

    lease: Lease
    failure: Failure
    not_before: datetime | None = None


Outcome = Completion | FailureReport


class BatchResult(msgspec.Struct):
    """What a batch write did: the new states it recorded and, per job, why it refused."""

    accepted: list[JobState]
    rejected: dict[UUID, LedgerError]
