"""Decision replay of workflow runs (pure): a run's history re-decided command by command
(the submit from its request, each step's end from its job's history, the operator commands
from their arguments) gives no finding when clean, and one finding per kind of tampering."""

from __future__ import annotations

from collections.abc import Sequence
from uuid import UUID

import msgspec
from workflow_helpers import DEFINITIONS, RETRYABLE, T0, Driver, ext, job, request

from ledger.core.codec import Record
from ledger.core.events import JobEvent
from ledger.core.replay_findings import JobReplay
from ledger.core.workflow_replay import check_run
from ledger.core.workflows.events import (
    WorkflowEvent,
    WorkflowStatusChanged,
    WorkflowStepReleased,
    WorkflowStepSucceeded,
)
from ledger.core.workflows.ids import step_job_id
from ledger.core.workflows.release import Decision
from ledger.core.workflows.spec import WorkflowRequest
from ledger.core.workflows.status import RunStatus

UNSATISFIED = "workflow.dependency_unsatisfied"
DEFINITION_STREAMS = {name: [(T0, definition)] for name, definition in DEFINITIONS.items()}


class Recorder(Driver):
    """The driver, keeping each step job's events too (the histories replay reads)."""

    def __init__(self, req: WorkflowRequest) -> None:
        self.job_events: dict[UUID, list[JobEvent]] = {}
        super().__init__(req)

    def _take(self, decision: Decision) -> object:  # type: ignore[override]
        for item in decision.enqueue:
            self.job_events[item.job_id] = [item.enqueued]
        return super()._take(decision)

    def _job_events(self, job_id: UUID, events: Sequence[JobEvent]) -> None:
        self.job_events[job_id].extend(events)
        super()._job_events(job_id, events)

    def check(self, run: list[WorkflowEvent] | None = None, **drop: int) -> JobReplay:
        """Replay the run's history (or ``run``, a tampered one) against the job histories."""
        events = self.history if run is None else run
        records = [Record(self.state.run_id, v, e) for v, e in enumerate(events, start=1)]
        jobs = {
            job_id: [Record(job_id, v, e) for v, e in enumerate(history, start=1)]
            for job_id, history in self.job_events.items()
        }
        return check_run(records, jobs, DEFINITION_STREAMS)


def _worked() -> Recorder:
    """root -> (a, gate) -> sink; a retried once; the gate completed; an appended step."""
    run = Recorder(
        request(job("root"), job("a", "root"), ext("gate", "root"), job("sink", "a", "gate"))
    )
    run.succeed("root", {"n": 1})
    run.fail("a", RETRYABLE)
    run.succeed("a")
    run.complete("gate", True, output={"by": "ann"})
    run.append("more", job("extra", "root"))
    run.succeed("extra")
    run.succeed("sink")
    assert run.state.status is RunStatus.SUCCEEDED
    return run


def _index(events: list[WorkflowEvent], kind: type, key: str | None = None) -> int:
    return next(
        i
        for i, e in enumerate(events)
        if isinstance(e, kind) and (key is None or getattr(e, "step_key", None) == key)
    )


def test_a_clean_history_gives_no_finding() -> None:
    """Submit, ends, a retry, a completion, an append, a dead letter with its unsatisfied
    cancel, and a cancel: every command re-decided gives what was recorded."""
    worked = _worked()
    assert worked.check().findings == []
    assert worked.check().events == len(worked.history)
    failing = Recorder(request(job("a"), job("b", "a"), job("c")))
    failing.fail("a")
    failing.cancel("enough")
    replay = failing.check()
    assert replay.findings == [] and replay.kind == "workflow"


def test_a_release_that_did_not_follow_is_a_finding() -> None:
    """The release of ``sink`` left out of the command that should have written it: that
    command's re-decision differs (and the sink's later end no longer folds)."""
    worked = _worked()
    events = list(worked.history)
    gone = _index(events, WorkflowStepReleased, "sink")
    del events[gone]
    findings = worked.check(events).findings
    # At the last event of the command that should have ended with it (the completion).
    assert (findings[0].rule, findings[0].version) == ("decision.differs", gone)
    assert "workflow_step_released" in findings[0].expected
    assert findings[-1].rule == "history.illegal_transition"


def test_a_release_instead_of_an_unsatisfied_cancel_is_a_finding() -> None:
    """``a`` dead-lettered, but ``b`` (on_success of ``a``) recorded as released instead of
    cancelled as unsatisfied: the re-decided end of ``a`` differs at that event, and the fold
    refuses the release of a step whose prerequisite failed."""
    run = Recorder(request(job("a"), job("b", "a")))
    run.fail("a")
    events = list(run.history)
    at = next(i for i, e in enumerate(events) if getattr(e, "code", None) == UNSATISFIED)
    job_id = step_job_id(run.state.run_id, "b")
    events[at] = WorkflowStepReleased(at=events[at].at, step_key="b", job_id=job_id)
    differs, refused = run.check(events).findings
    assert (differs.rule, differs.version) == ("decision.differs", at + 1)
    assert "workflow_step_cancelled" in differs.expected
    assert differs.topic == "workflow_step_released"
    assert (refused.rule, refused.version) == ("history.illegal_transition", at + 1)


def test_a_step_released_twice_is_a_finding() -> None:
    """The root's release recorded twice: the submit's re-decision differs at the second,
    and the fold refuses it (its version named by both)."""
    run = Recorder(request(job("a")))
    events = list(run.history)
    at = _index(events, WorkflowStepReleased, "a")
    events.insert(at + 1, events[at])
    differs, refused = run.check(events).findings
    assert (differs.rule, differs.version) == ("decision.differs", at + 2)
    assert (refused.rule, refused.version) == ("history.illegal_transition", at + 2)
    assert "released" in refused.expected


def test_a_status_the_steps_do_not_add_up_to_is_a_finding() -> None:
    """The last roll-up says completed_with_errors over steps that all succeeded."""
    worked = _worked()
    events = list(worked.history)
    last = len(events) - 1
    assert isinstance(events[last], WorkflowStatusChanged)
    events[last] = msgspec.structs.replace(
        events[last], status=RunStatus.COMPLETED_WITH_ERRORS, result=None
    )
    differs, refused = worked.check(events).findings
    assert (differs.rule, differs.version) == ("decision.differs", last + 1)
    assert "status=succeeded" in differs.expected
    assert (refused.rule, refused.version) == ("history.illegal_transition", last + 1)
    assert "its steps say succeeded" in refused.expected


def test_a_step_output_that_is_not_its_jobs_is_a_finding() -> None:
    """A step's recorded output differs from its job's ``job_succeeded`` output."""
    worked = _worked()
    events = list(worked.history)
    at = _index(events, WorkflowStepSucceeded, "root")
    events[at] = msgspec.structs.replace(events[at], output={"n": 2})
    [finding, *_] = worked.check(events).findings
    assert (finding.rule, finding.version) == ("decision.differs", at + 1)
    assert '{"n":1}' in finding.expected and '{"n":2}' in finding.recorded


def test_a_step_end_without_its_jobs_end_is_a_finding() -> None:
    """The run says a step succeeded, its job's history has no end."""
    run = Recorder(request(job("a")))
    run.succeed("a")
    job_id = run.state.steps["a"].job_id
    assert job_id is not None
    run.job_events[job_id] = run.job_events[job_id][:2]  # enqueued, leased
    [finding] = run.check().findings
    assert finding.rule == "workflow.step_end_without_job_end"


def test_a_jobs_end_the_run_never_recorded_is_a_finding() -> None:
    """The step job succeeded, the run's stream stops before the step's end."""
    run = Recorder(request(job("a")))
    run.succeed("a")
    events = run.history[: _index(run.history, WorkflowStepSucceeded, "a")]
    [finding] = run.check(events).findings
    assert finding.rule == "workflow.job_end_unrecorded" and "'a'" in finding.expected


def test_a_submit_without_its_definitions_is_refused() -> None:
    """The definition version a resolution names is not in the type's stream."""
    run = Recorder(request(job("a")))
    records = [Record(run.state.run_id, v, e) for v, e in enumerate(run.history, start=1)]
    [finding] = check_run(records, {}, {}).findings
    assert (finding.rule, finding.version) == ("decision.refused", 1)
