"""Builders for workflow tests: specs in a line, and a driver that runs each released
step's job through the real job decisions and fold, feeding every job event back to the
run as the policy will (no database: these are the pure core's tests)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from uuid import UUID, uuid4

from ledger.core import decide
from ledger.core.events import JobEvent
from ledger.core.state import JobState, evolve
from ledger.core.values import JSON, Failure, FailureKind, JobDefinition
from ledger.core.workflows import decide as wf
from ledger.core.workflows.events import WorkflowEvent
from ledger.core.workflows.release import Decision
from ledger.core.workflows.spec import (
    Dependency,
    ExternalStep,
    JobStep,
    ReleaseMode,
    StepRequest,
    WorkflowRequest,
)
from ledger.core.workflows.state import RunState, fold

T0 = datetime(2026, 1, 1, tzinfo=UTC)
DEFINITIONS = {
    "work": JobDefinition(job_type="work", max_attempts=3, default_timeout_s=60.0),
    "off": JobDefinition(job_type="off", enabled=False),
}
FAILURE = Failure(kind=FailureKind.TERMINAL, code="test.boom", message="boom")
RETRYABLE = Failure(kind=FailureKind.RETRYABLE, code="test.again", message="again")


def deps(*names: str, mode: ReleaseMode = ReleaseMode.ON_SUCCESS) -> tuple[Dependency, ...]:
    """``a`` or ``a:t`` (on_terminal) for each prerequisite."""
    out = []
    for name in names:
        key, _, flag = name.partition(":")
        out.append(Dependency(step=key, mode=ReleaseMode.ON_TERMINAL if flag == "t" else mode))
    return tuple(out)


def job(key: str, *after: str, **fields: object) -> JobStep:
    return JobStep(
        key=key, job_type=str(fields.pop("job_type", "work")), depends_on=deps(*after), **fields
    )  # type: ignore[arg-type]


def ext(key: str, *after: str) -> ExternalStep:
    return ExternalStep(key=key, depends_on=deps(*after))


def request(*steps: StepRequest, **fields: object) -> WorkflowRequest:
    return WorkflowRequest(
        workflow_type=str(fields.pop("workflow_type", "etl")), steps=steps, **fields
    )  # type: ignore[arg-type]


class Driver:
    """One run and its jobs, moved step by step through real decisions. Every run event is
    also kept in ``history``; :meth:`replayed` folds it from nothing."""

    def __init__(self, req: WorkflowRequest | Decision, *, run_id: UUID | None = None) -> None:
        """A run submitted from ``req``, or started by a decision (a recovery's)."""
        self.now = T0
        self.jobs: dict[UUID, JobState] = {}
        self.step_of: dict[UUID, str] = {}
        self.history: list[WorkflowEvent] = []
        self.decisions: list[Decision] = []
        self.cancelled_jobs: list[UUID] = []
        if isinstance(req, WorkflowRequest):
            req = wf.decide_submit(run_id or uuid4(), req, DEFINITIONS, self.now)
        self.state: RunState = self._take(req)

    def _take(self, decision: Decision) -> RunState:
        self.decisions.append(decision)
        self.history.extend(decision.events)
        for item in decision.enqueue:
            assert item.job_id not in self.jobs, "a step's job enqueued twice"
            self.jobs[item.job_id] = evolve(None, item.enqueued)
            self.step_of[item.job_id] = item.step_key
        self.state = decision.state
        for job_id in decision.cancel_jobs:
            self.cancelled_jobs.append(job_id)
            self._job_events(job_id, [decide.decide_cancel(self.jobs[job_id], self.now, "run")])
        return self.state

    def tick(self) -> datetime:
        self.now += timedelta(seconds=1)
        return self.now

    def job_of(self, key: str) -> JobState:
        job_id = self.state.steps[key].job_id
        assert job_id is not None, f"step {key} has no job"
        return self.jobs[job_id]

    def _job_events(self, job_id: UUID, events: Sequence[JobEvent]) -> None:
        key = self.step_of[job_id]
        for event in events:
            self.jobs[job_id] = evolve(self.jobs[job_id], event)
            self._take(wf.decide_job_event(self.state, key, job_id, event, self.jobs[job_id]))

    def start(self, key: str) -> None:
        state = self.job_of(key)
        self.now = max(self.tick(), state.run_at)  # a retry waits out its backoff
        self._job_events(state.job_id, [decide.decide_lease(state, "w", 30, self.now)])

    def _leased(self, key: str) -> JobState:
        if self.job_of(key).lease is None:
            self.start(key)
        return self.job_of(key)

    def succeed(self, key: str, output: JSON | None = None) -> None:
        state = self._leased(key)
        assert state.lease is not None
        event = decide.decide_succeed(state, state.lease, self.tick(), output=output)
        self._job_events(state.job_id, [event])

    def fail(self, key: str, failure: Failure = FAILURE) -> None:
        """One failed attempt: a retry for a retryable failure with attempts left, else the
        dead letter."""
        state = self._leased(key)
        assert state.lease is not None
        events = decide.decide_fail(state, state.lease, self.tick(), failure, jitter_draw=0.5)
        self._job_events(state.job_id, events)

    def hand_back(self, key: str) -> None:
        state = self._leased(key)
        assert state.lease is not None
        event = decide.decide_release(state, state.lease, self.tick(), "shutting down")
        self._job_events(state.job_id, [event])

    def cancel_job(self, key: str) -> None:
        state = self.job_of(key)
        self._job_events(state.job_id, [decide.decide_cancel(state, self.tick(), "operator")])

    def complete(self, key: str, succeeded: bool = True, **kw: object) -> Decision:
        decision = wf.decide_complete_external(self.state, key, succeeded, self.tick(), **kw)  # type: ignore[arg-type]
        self._take(decision)
        return decision

    def cancel(self, reason: str = "stop") -> Decision:
        decision = wf.decide_cancel(self.state, reason, self.tick())
        self._take(decision)
        return decision

    def append(self, mutation_key: str, *steps: StepRequest) -> Decision:
        decision = wf.decide_append(self.state, mutation_key, steps, DEFINITIONS, self.tick())
        self._take(decision)
        return decision

    def statuses(self) -> dict[str, str]:
        return {key: str(step.status) for key, step in self.state.steps.items()}

    def replayed(self) -> RunState | None:
        return fold(self.history)
