"""The audit projection's rules: one row per job or workflow event, keyed by its notification
position.

Pure: the runner (:mod:`projections.tracked`) and the replay both call :func:`audit_row`.
The
job type and org are the job's own (from its ``job_enqueued`` event), never guessed: the
caller passes the job's enqueue request, known from its fold, its cache or ``jl_queue``.

``code`` is the failure code of the events that carry a :class:`~ledger.core.events.Failure`
(``job_failed``, ``job_dead_lettered``), the error code of a ``job_reap_deferred`` (what made
the reap fail, e.g. ``store.busy``), and ``NULL`` on every other row. ``job_retry_scheduled``
carries none: the retry's code is that of the ``job_failed`` just before it in the same job
(recorded in the same commit), which is how audit queries match retries by code
(:mod:`ledger.store.audit_reads`), so the rule needs no state beyond the event.

A workflow run's own events have rows too (version 3): ``job_id`` is then the stream's id,
the run's, and ``job_type`` / ``org`` are the run's ``workflow_type`` / ``org`` (from its
``workflow_submitted``), so the filters by type, org, event and time work on them as on jobs.
``workflow_run`` and ``step_key`` are the run and step the row belongs to: a run event's own
(``step_key`` ``NULL`` on run-level events such as ``workflow_status_changed``), and on a
step's job's events the job's link (``job_enqueued`` v2); ``NULL`` on a plain job's rows.
``code`` of a ``workflow_step_failed`` is its failure's, of a ``workflow_step_cancelled`` its
cancel code (``workflow.dependency_unsatisfied``, ...).

A source's poll events have rows too: ``job_id`` is the source's stream id, ``job_type``
``jobledger.source_poll`` (:data:`SOURCE_POLL_ORIGIN`), ``org`` ``NULL``; ``code`` is a failed
poll's error code or a skipped poll's reason code (``source.breaker_open``).

A cron schedule's events have rows too (version 4): ``job_id`` is the schedule's stream id
(:func:`~ledger.core.schedules.state.schedule_stream_id`), ``job_type`` / ``org`` those of the
jobs the schedule enqueued when the event was recorded (its latest ``schedule_added``), so
``audit --type T`` shows a type's schedules beside its jobs. ``code`` of a ``schedule_missed``
whose slots' jobs enqueue refused is ``schedule.enqueue_refused`` (``NULL`` for a catch-up
policy's miss).
"""

from __future__ import annotations

from typing import Any, NamedTuple
from uuid import UUID

from ledger.core.events import Event, JobEvent, JobReapDeferred
from ledger.core.queue_pauses import QUEUE_EVENTS, QueuePaused, QueueResumed
from ledger.core.retention import RETENTION_EVENTS
from ledger.core.schedules.events import SCHEDULE_EVENTS, ScheduleEvent, ScheduleMissed
from ledger.core.source_polls.events import (
    SOURCE_POLL_EVENTS,
    SOURCE_POLL_JOB_TYPE,
    SourcePollFailed,
    SourcePollSkipped,
)
from ledger.core.times import to_us
from ledger.core.values import Failure
from ledger.core.workflows.events import WORKFLOW_EVENTS, WorkflowEvent, WorkflowStepCancelled
from ledger.views.view import ALL_JOB_EVENTS, Projection

ALL_WORKFLOW_EVENTS = tuple(cls.name for cls in WORKFLOW_EVENTS)
ALL_SOURCE_POLL_EVENTS = tuple(cls.name for cls in SOURCE_POLL_EVENTS)
ALL_RETENTION_EVENTS = tuple(cls.name for cls in RETENTION_EVENTS)
ALL_SCHEDULE_EVENTS = tuple(cls.name for cls in SCHEDULE_EVENTS)
ENQUEUE_REFUSED = "schedule.enqueue_refused"
"""The code of a ``schedule_missed`` row whose slots' jobs enqueue refused."""

ALL_QUEUE_EVENTS = tuple(cls.name for cls in QUEUE_EVENTS)
AuditedEvent = JobEvent | WorkflowEvent | ScheduleEvent | QueuePaused | QueueResumed
"""The events whose rows need their stream's origin (a job's, a run's, a schedule's, a
queue's); source polls' and retention's rows have a fixed one."""

COLUMNS = (
    "position",
    "job_id",
    "job_type",
    "org",
    "event",
    "worker_id",
    "run_number",
    "attempt",
    "at",
    "code",
    "workflow_run",
    "step_key",
)


class Origin(NamedTuple):
    """What a stream's rows carry besides the event: a job's type, org and workflow link, a
    run's workflow type and org (its link is itself), or a schedule's job type and org."""

    job_type: str
    org: str | None
    workflow_run: UUID | None = None
    step_key: str | None = None


PROJECTION = Projection(
    "audit",
    4,
    "jl_audit",
    ("position",),
    COLUMNS,
    "schema_audit",
    ALL_JOB_EVENTS
    + ALL_WORKFLOW_EVENTS
    + ALL_SCHEDULE_EVENTS
    + ALL_SOURCE_POLL_EVENTS
    + ALL_RETENTION_EVENTS
    + ALL_QUEUE_EVENTS,
    mode="tracked",
    description="one row per job, workflow, schedule, source-poll, retention or queue event, "
    "indexed for audit queries (tracked)",
)

SOURCE_POLL_ORIGIN = Origin(SOURCE_POLL_JOB_TYPE, None)
"""What a source-poll event's row carries: the poll job type, no org (a source's stream
has none; its ``job_id`` is the source's stream id)."""


RETENTION_ORIGIN = Origin("retention", None)
"""The retention stream's rows (a rule set, a batch archived): ``job_id`` is the stream's id
and ``job_type`` ``retention``, so ``audit --type retention`` lists them. Retention's events
are newer than any database holding this view's version 3, so they add rows without a
version bump (no existing view lacks one)."""


def queue_origin(event: QueuePaused | QueueResumed) -> Origin:
    """A queue event's row's origin: ``job_type`` ``queue:<name>``, no org (a queue spans
    orgs), so ``audit --event queue_paused`` and ``--type queue:<name>`` find them."""
    return Origin(f"queue:{event.queue}", None)


def audit_row(
    position: int, job_id: UUID, event: JobEvent | WorkflowEvent | Event, origin: Origin
) -> dict[str, Any]:
    """The audit row of one job event, or of one workflow event (``job_id`` the run's id,
    ``origin`` its workflow type and org); ``None`` where the event has no worker/run/attempt,
    no code, or belongs to no workflow run. A workflow event's ``step_key`` is its own."""
    workflow_run, step_key = origin.workflow_run, origin.step_key
    if isinstance(event, WorkflowEvent):
        workflow_run, step_key = job_id, getattr(event, "step_key", None)
    return {
        "position": position,
        "job_id": job_id,
        "job_type": origin.job_type,
        "org": origin.org,
        "event": event.name,
        "worker_id": getattr(event, "worker_id", None),
        "run_number": getattr(event, "run_number", None),
        "attempt": getattr(event, "attempt", None),
        "at": to_us(event.at),
        "code": _code(event),
        "workflow_run": workflow_run,
        "step_key": step_key,
    }


def _code(event: JobEvent | WorkflowEvent | Event) -> str | None:
    """The code an audit query matches on: a failure's, a deferred reap's error's, a step
    cancel's, a failed or skipped poll's, or a refused schedule slot's."""
    if isinstance(event, SourcePollFailed | SourcePollSkipped):
        return event.code
    if isinstance(event, ScheduleMissed):
        return None if event.reason is None else ENQUEUE_REFUSED
    if isinstance(event, JobReapDeferred):
        return event.cause.code
    if isinstance(event, WorkflowStepCancelled):
        return event.code
    failure = getattr(event, "failure", None)
    return failure.code if isinstance(failure, Failure) else None
