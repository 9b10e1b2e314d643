"""``from ledger import ...`` gives every name a user's program needs, and the two kinds of
handler context share their method names."""

from __future__ import annotations

import inspect

from fresh_interpreter import probe

import ledger
from ledger.runtime.job_context import JobContext, SyncJobContext

USER_NAMES = {
    # open, declare, enqueue, work
    "Ledger",
    "Registry",
    "TypedJob",
    "KeywordJob",
    "EnqueueOptions",
    "EnqueueRequest",
    "JobContext",
    "SyncJobContext",
    "Result",
    "PermanentError",
    "TransientError",
    "WorkerPool",
    "PoolConfig",
    "BackoffPolicy",
    "RateLimit",
    "Subject",
    "SubjectOp",
    # what enqueue answers, and reading a job
    "Enqueued",
    "EnqueueOutcome",
    "JobState",
    "JobStatus",
    "Record",
    "Reader",
    # workflows
    "WorkflowRequest",
    "JobStep",
    "ExternalStep",
    "Dependency",
    "WorkflowHandle",
    # errors
    "LedgerError",
    "InvalidRequestError",
    "DefinitionNotFoundError",
    "IdempotencyConflictError",
    "JobNotFoundError",
    "JobNotSucceededError",
    "JobWaitTimeoutError",
    "LeaseOwnerMismatchError",
    "WorkflowNotFoundError",
    # tests
    "FakeClock",
    "Clock",
    "SystemClock",
}


def test_every_name_a_user_needs_is_importable_from_ledger() -> None:
    """Each listed name is in ``ledger.__all__`` and resolves (lazily) to the real object."""
    missing = USER_NAMES - set(ledger.__all__)
    assert not missing, f"not exported from ledger: {sorted(missing)}"
    assert ledger.Enqueued.__module__ == "ledger.api.job_handle"
    assert ledger.TypedJob.__module__ == "ledger.runtime.typed_jobs"


def test_importing_the_typed_job_names_loads_no_database_driver() -> None:
    """The typed-job and handle names load lazily: importing them loads no driver nor the
    event store library."""
    loaded = probe(
        "from ledger import Enqueued, JobContext, Registry, SyncJobContext, TypedJob\n",
        ["psycopg", "sqlite3", "eventsourcing"],
    ).loaded
    assert loaded == []


def test_both_contexts_offer_the_same_method_names() -> None:
    """A sync handler calls what an async one awaits, under the same names: every public
    method of JobContext is on SyncJobContext, and there none is a coroutine function."""

    def methods(cls: type) -> dict[str, object]:
        return {
            name: member
            for name, member in inspect.getmembers(cls, inspect.isfunction)
            if not name.startswith("_")
        }

    async_methods, sync_methods = methods(JobContext), methods(SyncJobContext)
    assert set(async_methods) == set(sync_methods)
    assert {"heartbeat", "progress", "prerequisite_outputs"} <= set(sync_methods)
    assert not any(inspect.iscoroutinefunction(m) for m in sync_methods.values())
    assert all(
        inspect.iscoroutinefunction(async_methods[name])
        for name in ("heartbeat", "progress", "prerequisite_outputs")
    )
