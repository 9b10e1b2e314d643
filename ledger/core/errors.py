"""Errors with stable codes.

Every error the ledger raises on purpose is a :class:`LedgerError` carrying a ``code`` that
never changes between releases (scripts and dashboards match on it), and a human message.
"""

from __future__ import annotations

from typing import ClassVar


class LedgerError(Exception):
    """Base class: ``code`` is the stable machine-readable identifier; ``sqlstate`` is the
    database's own error code where a database error caused it."""

    code: ClassVar[str] = "ledger.error"

    def __init__(self, message: str, *, sqlstate: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.sqlstate = sqlstate

    def __str__(self) -> str:
        return f"{self.code}: {self.message}"


class InvalidRequestError(LedgerError):
    """A request with a missing, malformed or out-of-range field."""

    code = "request.invalid"


class SourceNotFoundError(LedgerError):
    """A read of a sync source the ledger (or the caller's org) has nothing of."""

    code = "source.not_found"


class DefinitionNotFoundError(LedgerError):
    """Enqueue of a job type that is not defined, or is disabled."""

    code = "job.definition_not_found_or_disabled"


class IdempotencyConflictError(LedgerError):
    """An idempotency key reused with different requested fields."""

    code = "job.idempotency_conflict"

    def __init__(self, message: str, existing_job_id: object) -> None:
        super().__init__(message)
        self.existing_job_id = existing_job_id


class JobNotFoundError(LedgerError):
    """No job has this id."""

    code = "job.not_found"


class LeaseOwnerMismatchError(LedgerError):
    """A worker write whose fence (job, run, attempt, worker, live lease) no longer holds."""

    code = "job.lease_owner_mismatch"


class JobCancelledError(LeaseOwnerMismatchError):
    """A worker write for a job that was cancelled while this worker held its lease: the
    handler should stop. A :class:`LeaseOwnerMismatchError` (the fence refuses the write) with
    a code of its own, so a handler or a pool can tell "stop, you were cancelled" from "your
    lease went elsewhere"."""

    code = "job.cancelled"


class InvalidTransitionError(LedgerError):
    """An operator command that the job's current status does not allow."""

    code = "job.invalid_transition"


class ConcurrencyConflictError(LedgerError):
    """Another writer appended to the same job first; the command may be retried."""

    code = "store.concurrency_conflict"


class DatabaseBusyError(LedgerError):
    """A lock could not be had in time (another writer holds it); the command may be retried."""

    code = "store.busy"


class MigrationBusyError(DatabaseBusyError):
    """Another process's schema change (``init``, ``migrate``, a rebuild) held the database's
    migration lock for longer than this one would wait; run it again once that has ended."""


class StoreError(LedgerError):
    """Any other database error, with the database's error code in ``sqlstate``."""

    code = "store.error"


class ReadOnlyDatabaseError(LedgerError):
    """A write sent to a database that only reads: a hot standby (a streaming replica), or a
    reader opened on a replica (``--read-db``). Writes go to the primary (``--db``)."""

    code = "store.read_only"


class DatabaseNotInitialisedError(LedgerError):
    """The database has no jobledger tables; run ``jobledger init``."""

    code = "store.not_initialised"


class DatabaseUnusableError(LedgerError):
    """The database cannot be used: unreachable, not a database, or another schema."""

    code = "store.unusable"


class UnknownEventError(LedgerError):
    """A stored event whose topic or schema version this code cannot read."""

    code = "store.unknown_event"


class RetentionUnsupportedError(LedgerError):
    """This backend cannot move jobs to an archive yet (PostgreSQL: decision 31)."""

    code = "retention.unsupported"


class JobNotSucceededError(LedgerError):
    """The output of a job that has not succeeded (still live, dead or cancelled)."""

    code = "job.not_succeeded"


class JobWaitTimeoutError(LedgerError, TimeoutError):
    """A wait for a job to end that ran out of time (the job goes on; wait again or not)."""

    code = "job.wait_timeout"
