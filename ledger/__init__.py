"""jobledger: an event-sourced job ledger.

A durable job queue on SQLite or PostgreSQL in which every state change of every job is an
appended event, and every view is a projection of that history.

The public names below are loaded lazily (PEP 562): ``import ledger.core.events`` (or any pure
module) loads no database driver, while ``from ledger import Ledger`` loads the store it needs.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

_EXPORTS: dict[str, str] = {
    "AsyncLedger": "ledger.api.async_ledger",
    "AuditPage": "ledger.views.audit_query",
    "AuditQuery": "ledger.views.audit_query",
    "AuditRow": "ledger.views.audit_query",
    "BackoffPolicy": "ledger.core.values",
    "BatchResult": "ledger.jobs.outcomes",
    "Clock": "ledger.clock",
    "Completion": "ledger.jobs.outcomes",
    "ConcurrencyConflictError": "ledger.core.errors",
    "DatabaseBusyError": "ledger.core.errors",
    "DatabaseNotInitialisedError": "ledger.core.errors",
    "DatabaseUnusableError": "ledger.core.errors",
    "DefinitionNotFoundError": "ledger.core.errors",
    "Dependency": "ledger.core.workflows.spec",
    "EnqueueOptions": "ledger.runtime.typed_jobs",
    "EnqueueOutcome": "ledger.api.job_handle",
    "EnqueueRequest": "ledger.core.values",
    "Enqueued": "ledger.api.job_handle",
    "ExternalStep": "ledger.core.workflows.spec",
    "Failure": "ledger.core.values",
    "FailureKind": "ledger.core.values",
    "FailureReport": "ledger.jobs.outcomes",
    "FakeClock": "ledger.clock",
    "Health": "ledger.runtime.health",
    "IdempotencyConflictError": "ledger.core.errors",
    "IllegalTransitionError": "ledger.core.state",
    "InvalidRequestError": "ledger.core.errors",
    "InvalidTransitionError": "ledger.core.errors",
    "JobCancelledError": "ledger.core.errors",
    "JobContext": "ledger.runtime.handlers",
    "JobDefinition": "ledger.core.values",
    "JobNotFoundError": "ledger.core.errors",
    "JobNotSucceededError": "ledger.core.errors",
    "JobPage": "ledger.views.job_pages",
    "JobState": "ledger.core.state",
    "JobStatus": "ledger.core.values",
    "JobStep": "ledger.core.workflows.spec",
    "JobWaitTimeoutError": "ledger.core.errors",
    "KeywordJob": "ledger.runtime.typed_jobs",
    "Lease": "ledger.core.state",
    "LeaseOwnerMismatchError": "ledger.core.errors",
    "Ledger": "ledger.api.ledger",
    "LedgerError": "ledger.core.errors",
    "LimitCommands": "ledger.limits.limit_commands",
    "LimitReader": "ledger.limits.limit_reader",
    "ListedJob": "ledger.views.job_pages",
    "PermanentError": "ledger.runtime.handlers",
    "PoolConfig": "ledger.runtime.config",
    "PoolStats": "ledger.runtime.health",
    "RateLimit": "ledger.core.values",
    "ReadOnlyDatabaseError": "ledger.core.errors",
    "Reader": "ledger.api.reader",
    "Record": "ledger.core.codec",
    "Registry": "ledger.runtime.handlers",
    "ReplicaLag": "ledger.store.replica",
    "Result": "ledger.runtime.handlers",
    "RetentionCommands": "ledger.retention.retention_commands",
    "RetentionReader": "ledger.retention.retention_reader",
    "RetentionUnsupportedError": "ledger.core.errors",
    "ScheduleCommands": "ledger.schedules.schedule_commands",
    "ScheduleReader": "ledger.schedules.schedule_reader",
    "SourceCommands": "ledger.sources.source_commands",
    "SourceNotFoundError": "ledger.core.errors",
    "SourceReader": "ledger.sources.source_reader",
    "Stage": "ledger.core.values",
    "StoreError": "ledger.core.errors",
    "Subject": "ledger.core.values",
    "SubjectOp": "ledger.core.values",
    "SyncJobContext": "ledger.runtime.handlers",
    "SystemClock": "ledger.clock",
    "TokenCommands": "ledger.tokens.token_commands",
    "TokenReader": "ledger.tokens.token_reader",
    "TransientError": "ledger.runtime.handlers",
    "TypedJob": "ledger.runtime.typed_jobs",
    "UnknownEventError": "ledger.core.errors",
    "WorkerPool": "ledger.runtime.pool",
    "WorkflowCommands": "ledger.workflows.workflow_commands",
    "WorkflowHandle": "ledger.workflows.workflow_handle",
    "WorkflowNotFoundError": "ledger.core.workflows.errors",
    "WorkflowReader": "ledger.workflows.workflow_reader",
    "WorkflowRequest": "ledger.core.workflows.spec",
}

__all__ = [
    "AsyncLedger",
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
    "Dependency",
    "EnqueueOptions",
    "EnqueueOutcome",
    "EnqueueRequest",
    "Enqueued",
    "ExternalStep",
    "Failure",
    "FailureKind",
    "FailureReport",
    "FakeClock",
    "Health",
    "IdempotencyConflictError",
    "IllegalTransitionError",
    "InvalidRequestError",
    "InvalidTransitionError",
    "JobCancelledError",
    "JobContext",
    "JobDefinition",
    "JobNotFoundError",
    "JobNotSucceededError",
    "JobPage",
    "JobState",
    "JobStatus",
    "JobStep",
    "JobWaitTimeoutError",
    "KeywordJob",
    "Lease",
    "LeaseOwnerMismatchError",
    "Ledger",
    "LedgerError",
    "LimitCommands",
    "LimitReader",
    "ListedJob",
    "PermanentError",
    "PoolConfig",
    "PoolStats",
    "RateLimit",
    "ReadOnlyDatabaseError",
    "Reader",
    "Record",
    "Registry",
    "ReplicaLag",
    "Result",
    "RetentionCommands",
    "RetentionReader",
    "RetentionUnsupportedError",
    "ScheduleCommands",
    "ScheduleReader",
    "SourceCommands",
    "SourceNotFoundError",
    "SourceReader",
    "Stage",
    "StoreError",
    "Subject",
    "SubjectOp",
    "SyncJobContext",
    "SystemClock",
    "TokenCommands",
    "TokenReader",
    "TransientError",
    "TypedJob",
    "UnknownEventError",
    "WorkerPool",
    "WorkflowCommands",
    "WorkflowHandle",
    "WorkflowNotFoundError",
    "WorkflowReader",
    "WorkflowRequest",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'ledger' has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


if TYPE_CHECKING:  # what type checkers and editors see; never executed
    from ledger.api.async_ledger import AsyncLedger
    from ledger.api.job_handle import Enqueued, EnqueueOutcome
    from ledger.api.ledger import Ledger
    from ledger.api.reader import Reader
    from ledger.clock import Clock, FakeClock, SystemClock
    from ledger.core.codec import Record
    from ledger.core.errors import (
        ConcurrencyConflictError,
        DatabaseBusyError,
        DatabaseNotInitialisedError,
        DatabaseUnusableError,
        DefinitionNotFoundError,
        IdempotencyConflictError,
        InvalidRequestError,
        InvalidTransitionError,
        JobCancelledError,
        JobNotFoundError,
        JobNotSucceededError,
        JobWaitTimeoutError,
        LeaseOwnerMismatchError,
        LedgerError,
        ReadOnlyDatabaseError,
        RetentionUnsupportedError,
        SourceNotFoundError,
        StoreError,
        UnknownEventError,
    )
    from ledger.core.state import IllegalTransitionError, JobState, Lease
    from ledger.core.values import (
        BackoffPolicy,
        EnqueueRequest,
        Failure,
        FailureKind,
        JobDefinition,
        JobStatus,
        RateLimit,
        Stage,
        Subject,
        SubjectOp,
    )
    from ledger.core.workflows.errors import WorkflowNotFoundError
    from ledger.core.workflows.spec import Dependency, ExternalStep, JobStep, WorkflowRequest
    from ledger.jobs.outcomes import BatchResult, Completion, FailureReport
    from ledger.limits.limit_commands import LimitCommands
    from ledger.limits.limit_reader import LimitReader
    from ledger.retention.retention_commands import RetentionCommands
    from ledger.retention.retention_reader import RetentionReader
    from ledger.runtime.config import PoolConfig
    from ledger.runtime.handlers import (
        JobContext,
        PermanentError,
        Registry,
        Result,
        SyncJobContext,
        TransientError,
    )
    from ledger.runtime.health import Health, PoolStats
    from ledger.runtime.pool import WorkerPool
    from ledger.runtime.typed_jobs import EnqueueOptions, KeywordJob, TypedJob
    from ledger.schedules.schedule_commands import ScheduleCommands
    from ledger.schedules.schedule_reader import ScheduleReader
    from ledger.sources.source_commands import SourceCommands
    from ledger.sources.source_reader import SourceReader
    from ledger.store.replica import ReplicaLag
    from ledger.tokens.token_commands import TokenCommands
    from ledger.tokens.token_reader import TokenReader
    from ledger.views.audit_query import AuditPage, AuditQuery, AuditRow
    from ledger.views.job_pages import JobPage, ListedJob
    from ledger.workflows.workflow_commands import WorkflowCommands
    from ledger.workflows.workflow_handle import WorkflowHandle
    from ledger.workflows.workflow_reader import WorkflowReader
