"""The bounds a recorded event must keep: the rules of the command that would have made it.

An event that arrives without its command (a line of an import file) never went through a
decision, so nothing else stops it carrying a 2 MB payload, an empty org, a lease until
9999-12-31 or a NUL that PostgreSQL refuses mid-transaction. :func:`check_recorded` applies to
it the same checks :mod:`ledger.core.requests` and :mod:`ledger.core.decide` apply to what
callers send, so a history that imports is one the commands could have written, and one
that every backend can store and every reader read back. Pure: no store, driver or clock.
"""

from __future__ import annotations

from datetime import datetime

from ledger.core.errors import InvalidRequestError
from ledger.core.events import (
    Event,
    JobCancelled,
    JobDeadLettered,
    JobEnqueued,
    JobFailed,
    JobHandlerStopped,
    JobHeartbeated,
    JobLeased,
    JobProgressed,
    JobReleased,
    JobRequeued,
    JobRetryScheduled,
    JobStageChanged,
    JobSucceeded,
    JobTypeDefined,
    JobTypeUpdated,
)
from ledger.core.limits import (
    MAX_LEASE_S,
    check_count,
    check_name,
    check_reason,
    check_seconds,
    check_subject_text,
)
from ledger.core.requests import (
    INT32,
    check_failure,
    check_output,
    normalise_request,
    validate_definition,
)


def _lease(at: datetime, expires: datetime) -> None:
    check_seconds((expires - at).total_seconds(), "lease length", most=MAX_LEASE_S)


def _execution(run_number: int, attempt: int) -> None:
    if not 1 <= run_number < INT32 or not 0 <= attempt < INT32:
        raise InvalidRequestError("run_number and attempt must fit in 32 bits")


def _job_enqueued(event: JobEnqueued) -> None:
    normalise_request(event.request)
    if not -INT32 <= event.priority < INT32 or not 1 <= event.max_attempts < INT32:
        raise InvalidRequestError("priority and max_attempts must fit in 32 bits")
    check_seconds(event.timeout_s, "timeout_s")


def _worker_write(event: Event) -> None:
    if isinstance(event, JobLeased | JobHeartbeated):
        check_name(event.worker_id, "worker_id")
        _lease(event.at, event.lease_expires_at)
    elif isinstance(event, JobHandlerStopped):
        check_name(event.worker_id, "worker_id")
    elif isinstance(event, JobStageChanged):
        check_name(event.stage, "stage")
    elif isinstance(event, JobProgressed):
        for count, what in ((event.done, "done"), (event.total, "total")):
            if count is not None:
                check_count(count, f"progress {what}")
        if event.done is not None and event.total is not None and event.done > event.total:
            raise InvalidRequestError(f"progress done {event.done} is more than {event.total}")
        check_output(event.checkpoint, "checkpoint")
    elif isinstance(event, JobSucceeded):
        check_name(event.worker_id, "worker_id")
        check_output(event.output)
        for value, what in ((event.revision, "revision"), (event.content_hash, "hash")):
            if value is not None:
                check_subject_text(value, what)


def check_recorded(event: Event) -> None:
    """Raise :class:`~ledger.core.errors.InvalidRequestError` unless ``event`` keeps every
    bound its command enforces (field types are the codec's business, already checked)."""
    if isinstance(event, JobTypeDefined | JobTypeUpdated):
        validate_definition(event.definition)
        return
    if isinstance(event, JobEnqueued):
        _job_enqueued(event)
        return
    run_number = getattr(event, "run_number", 1)
    _execution(run_number, getattr(event, "attempt", 0))
    if isinstance(event, JobFailed | JobDeadLettered):
        if isinstance(event, JobFailed):
            check_name(event.worker_id, "worker_id")
        if check_failure(event.failure) != event.failure:
            raise InvalidRequestError(
                "failure message holds NUL, a lone surrogate or more than 8 KiB"
            )
    elif isinstance(event, JobReleased | JobCancelled | JobRequeued):
        check_reason(event.reason)
        if isinstance(event, JobReleased):
            check_name(event.worker_id, "worker_id")
    elif isinstance(event, JobRetryScheduled):
        check_seconds(event.delay_s, "delay_s", zero=True)
    else:
        _worker_write(event)
