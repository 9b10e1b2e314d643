"""Decision replay for workflow runs: re-decide a run from its history and compare.

A run's stream is a sequence of commands, each recorded as one *cause* and the follow-ups
the same decision wrote (releases, unsatisfied cancels, the roll-up): the submit (its
``workflow_submitted``), a step job's end (``workflow_step_succeeded`` / ``_failed`` /
``_cancelled`` with ``workflow.job_cancelled``), an external completion, a cancel, an
append. :func:`check_run` cuts the stream at each cause, re-runs the same pure decision of
:mod:`ledger.core.workflows.decide` over the run's state before it — the submit from the
recorded request and the job-type definitions of the versions its resolutions name, a step's
end from the step job's own ending event (its history), an operator command from its
recorded arguments — and compares the events it returns with those recorded. The run's fold
must accept every event (it refuses a release before its prerequisites ended, a status the
steps do not say, a step released twice); a follow-up that the cause does not explain (a
release that did not follow) is a mismatch of its command, and a step job that ended while
its step never did is a finding of its own.

A recovered run's first command (``workflow_submitted`` + ``workflow_recovered``) depends on
the source run's state, which is another stream: it is checked by the fold alone; every
later command is re-decided like any run's. Findings are
:class:`~ledger.core.replay_findings.ReplayFinding` as for jobs, numbered by the event's
version in the run's stream. Pure: no store, driver or clock.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from uuid import UUID

from ledger.core.codec import Record
from ledger.core.errors import LedgerError
from ledger.core.events import JobCancelled, JobDeadLettered, JobEvent, JobSucceeded
from ledger.core.replay_findings import JobReplay, MismatchError, ReplayFinding, compare, describe
from ledger.core.state import IllegalTransitionError, JobState, evolve
from ledger.core.values import JobDefinition
from ledger.core.workflows import decide
from ledger.core.workflows.events import (
    WorkflowCancelled,
    WorkflowEvent,
    WorkflowExternalStepCompleted,
    WorkflowRecovered,
    WorkflowStepCancelled,
    WorkflowStepFailed,
    WorkflowStepReleased,
    WorkflowStepsAppended,
    WorkflowStepSucceeded,
    WorkflowSubmitted,
)
from ledger.core.workflows.release import Decision
from ledger.core.workflows.spec import StepResolution
from ledger.core.workflows.state import RunState
from ledger.core.workflows.state import evolve as evolve_run
from ledger.core.workflows.status import StepStatus

RUN_KIND = "workflow"
"""The ``kind`` of a run's :class:`~ledger.core.replay_findings.JobReplay`."""
JOB_CANCELLED = "workflow.job_cancelled"
_ENDS = (JobSucceeded, JobDeadLettered, JobCancelled)
"""The job events that end a step (``step_outcome``); a step's job is never requeued."""

Definitions = Mapping[str, Sequence[tuple[datetime, JobDefinition]]]
"""Each job type's definition stream (``decision_replay.definitions_of``)."""


def is_cause(event: WorkflowEvent) -> bool:
    """Whether ``event`` starts a command: a submit, a step's end, a completion, a cancel, an
    append (everything else is a follow-up of the cause before it)."""
    if isinstance(event, WorkflowStepCancelled):
        return event.code == JOB_CANCELLED
    return isinstance(
        event,
        WorkflowSubmitted
        | WorkflowStepSucceeded
        | WorkflowStepFailed
        | WorkflowExternalStepCompleted
        | WorkflowCancelled
        | WorkflowStepsAppended,
    )


def step_job_ids(records: Sequence[Record]) -> list[UUID]:
    """The jobs a run's releases enqueued, in release order (whose histories
    :func:`check_run` reads)."""
    return [
        r.event.job_id
        for r in records
        if isinstance(r.event, WorkflowStepReleased) and r.event.job_id is not None
    ]


def job_types(records: Sequence[Record]) -> set[str]:
    """The job types a run's submit and appends name (whose definitions it needs)."""
    names: set[str] = set()
    for record in records:
        event = record.event
        steps = (
            event.request.steps
            if isinstance(event, WorkflowSubmitted)
            else event.steps
            if isinstance(event, WorkflowStepsAppended)
            else ()
        )
        names.update(t for step in steps if (t := getattr(step, "job_type", None)) is not None)
    return names


def _commands(records: Sequence[Record]) -> list[list[Record]]:
    """The stream cut at each cause; a first group that is not a submit's is kept whole (its
    first event is then the finding)."""
    groups: list[list[Record]] = []
    for record in records:
        event = record.event
        if not groups or (isinstance(event, WorkflowEvent) and is_cause(event)):
            groups.append([record])
        else:
            groups[-1].append(record)
    return groups


def check_run(
    records: Sequence[Record],
    step_histories: Mapping[UUID, Sequence[Record]],
    definitions: Definitions,
) -> JobReplay:
    """Check one run's stream against the current workflow decisions.

    ``step_histories`` holds the history of each job the run released (missing or empty: the
    job's end cannot be re-decided, a finding); ``definitions`` the definition streams of the
    job types the run names. A fold refusal ends the check.
    """
    run_id = records[0].originator_id if records else UUID(int=0)
    findings: list[ReplayFinding] = []

    def finding(record: Record, rule: str, expected: str, recorded: str) -> None:
        findings.append(
            ReplayFinding(
                run_id,
                record.originator_version,
                record.event.name,
                rule,
                expected,
                recorded,
                kind=RUN_KIND,
            )
        )

    state: RunState | None = None
    checked = 0
    for group in _commands(records):
        try:
            _check_command(state, group, step_histories, definitions)
        except MismatchError as mismatch:
            at = group[min(mismatch.index, len(group) - 1)]
            finding(at, mismatch.rule, mismatch.expected, mismatch.recorded)
        for record in group:
            try:
                if not isinstance(record.event, WorkflowEvent):
                    raise IllegalTransitionError(f"{record.event.name} in a run's stream")
                state = evolve_run(state, record.event)
            except IllegalTransitionError as error:
                finding(
                    record,
                    "history.illegal_transition",
                    f"refused: {error}",
                    describe(record.event),
                )
                return JobReplay(run_id, checked + 1, findings, kind=RUN_KIND)
            checked += 1
    if state is not None and records:
        findings += _unrecorded_ends(state, records[-1], step_histories)
    return JobReplay(run_id, checked, findings, kind=RUN_KIND)


def _check_command(
    state: RunState | None,
    group: Sequence[Record],
    step_histories: Mapping[UUID, Sequence[Record]],
    definitions: Definitions,
) -> None:
    """Re-decide one command and compare; raise :class:`MismatchError` where it differs."""
    cause = group[0].event
    if not isinstance(cause, WorkflowEvent):
        return  # the fold reports it
    if state is None:
        if not isinstance(cause, WorkflowSubmitted):
            return  # the fold refuses an event before the submit
        if len(group) > 1 and isinstance(group[1].event, WorkflowRecovered):
            return  # decided over the source run's state: the fold alone checks it
        chosen = _definitions_named(cause.resolutions, cause.request.steps, definitions, cause)
        _compare(lambda: decide.decide_submit(cause.run_id, cause.request, chosen, cause.at), group)
        return
    if isinstance(cause, WorkflowStepSucceeded | WorkflowStepFailed | WorkflowStepCancelled):
        job_id = cause.job_id
        ended = None if job_id is None else _job_end(step_histories.get(job_id, ()))
        if job_id is None or ended is None:
            raise MismatchError(
                "workflow.step_end_without_job_end",
                f"job {job_id} of step {cause.step_key!r} ended (succeeded, dead-lettered or "
                "cancelled) in its own history",
                describe(cause),
            )
        event, job = ended
        _compare(lambda: decide.decide_job_event(state, cause.step_key, job_id, event, job), group)
    elif isinstance(cause, WorkflowExternalStepCompleted):
        _compare(
            lambda: decide.decide_complete_external(
                state,
                cause.step_key,
                cause.succeeded,
                cause.at,
                output=cause.output,
                reason=cause.reason,
            ),
            group,
        )
    elif isinstance(cause, WorkflowCancelled):
        _compare(lambda: decide.decide_cancel(state, cause.reason, cause.at), group)
    elif isinstance(cause, WorkflowStepsAppended):
        chosen = _definitions_named(cause.resolutions, cause.steps, definitions, cause)
        _compare(
            lambda: decide.decide_append(state, cause.mutation_key, cause.steps, chosen, cause.at),
            group,
        )


def _compare(decision: Callable[[], Decision], group: Sequence[Record]) -> None:
    recorded = [r.event for r in group]
    try:
        produced = decision().events
    except LedgerError as error:
        raise MismatchError(
            "decision.refused", f"refused: {error}", " + ".join(describe(e) for e in recorded)
        ) from None
    if len(produced) != len(recorded):
        # Point at the first event the two disagree on (an extra or a missing follow-up),
        # not at the cause both share.
        pairs = zip(produced, recorded, strict=False)
        index = next(
            (i for i, (a, b) in enumerate(pairs) if a != b), min(len(produced), len(recorded))
        )
        try:
            compare(produced, recorded)
        except MismatchError as mismatch:
            raise MismatchError(
                mismatch.rule, mismatch.expected, mismatch.recorded, index
            ) from None
    compare(produced, recorded)


def _definitions_named(
    resolutions: Sequence[StepResolution],
    steps: Sequence[object],
    definitions: Definitions,
    cause: WorkflowEvent,
) -> dict[str, JobDefinition]:
    """The definition of each job type at the version the recorded resolutions name (what
    the submit or append read, whenever its clock said it ran)."""
    versions = {r.key: r.definition_version for r in resolutions}
    chosen: dict[str, JobDefinition] = {}
    for step in steps:
        job_type = getattr(step, "job_type", None)
        key = getattr(step, "key", "")
        if job_type is None or job_type in chosen:
            continue
        version = versions.get(key)
        found = [d for _, d in definitions.get(job_type, ()) if d.version == version]
        if not found:
            raise MismatchError(
                "decision.refused",
                f"refused: job type {job_type!r} has no definition version {version}",
                describe(cause, ["at"]),
            )
        chosen[job_type] = found[-1]
    return chosen


def _job_end(history: Sequence[Record]) -> tuple[JobEvent, JobState] | None:
    """The event that ended a step's job and the job's state after it (``None``: not ended)."""
    state: JobState | None = None
    for record in history:
        if not isinstance(record.event, JobEvent):
            return None
        try:
            state = evolve(state, record.event)
        except IllegalTransitionError:
            return None  # the job's own replay reports it
        if isinstance(record.event, _ENDS):
            return record.event, state
    return None


def _unrecorded_ends(
    state: RunState, last: Record, step_histories: Mapping[UUID, Sequence[Record]]
) -> list[ReplayFinding]:
    """A finding per step still enqueued in the run whose job ended in its own history: the
    run missed the end (the policy appends it in the job's end's commit)."""
    found = []
    for key, step in state.steps.items():
        if step.status is not StepStatus.ENQUEUED or step.job_id is None:
            continue
        ended = _job_end(step_histories.get(step.job_id, ()))
        if ended is not None:
            found.append(
                ReplayFinding(
                    state.run_id,
                    last.originator_version,
                    last.event.name,
                    "workflow.job_end_unrecorded",
                    f"the end of step {key!r} after its job's {ended[0].name}",
                    f"step {key!r} still enqueued",
                    kind=RUN_KIND,
                )
            )
    return found
