"""jobledger: an event-sourced job ledger.

A durable job queue on SQLite or PostgreSQL in which every state change of every job is an
appended event, and every view is a projection of that history.
"""

from ledger.clock import Clock, FakeClock, SystemClock
from ledger.codec import Record
from ledger.errors import (
    ConcurrencyConflictError,
    DatabaseBusyError,
    DatabaseNotInitialisedError,
    DatabaseUnusableError,
    DefinitionNotFoundError,
    IdempotencyConflictError,
    InvalidRequestError,
    InvalidTransitionError,
    JobNotFoundError,
    LeaseOwnerMismatchError,
    LedgerError,
    StoreError,
)
from ledger.events import (
    BackoffPolicy,
    EnqueueRequest,
    Failure,
    FailureKind,
    JobDefinition,
    JobStatus,
    Stage,
    Subject,
    SubjectOp,
)
from ledger.ledger import BatchResult, Completion, FailureReport, Ledger
from ledger.state import IllegalTransitionError, JobState, Lease
from projections.audit_query import AuditPage, AuditQuery, AuditRow
from projections.job_list import JobPage, ListedJob

__all__ = [
    "AuditPage",
    "AuditQuery",
    "AuditRow",
    "BackoffPolicy",
    "BatchResult",
    "Clock",
    "Completion",
    "ConcurrencyConflictError",
    "DatabaseBusyError",
    "DatabaseNotInitialisedError",
    "DatabaseUnusableError",
    "DefinitionNotFoundError",
    "EnqueueRequest",
    "Failure",
    "FailureKind",
    "FailureReport",
    "FakeClock",
    "IdempotencyConflictError",
    "IllegalTransitionError",
    "InvalidRequestError",
    "InvalidTransitionError",
    "JobDefinition",
    "JobNotFoundError",
    "JobPage",
    "JobState",
    "JobStatus",
    "Lease",
    "LeaseOwnerMismatchError",
    "Ledger",
    "LedgerError",
    "ListedJob",
    "Record",
    "Stage",
    "StoreError",
    "Subject",
    "SubjectOp",
    "SystemClock",
]
