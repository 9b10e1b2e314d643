"""A run's steps through their transitions, driven by the pure decisions: releases,
fan-out and fan-in, on_success against on_terminal, transitive cancels, external steps,
appends, cancels and recovery; and the fold's refusals of histories no decision writes."""

from __future__ import annotations

from uuid import uuid4

import pytest
from msgspec.structs import replace
from workflow_helpers import DEFINITIONS, RETRYABLE, T0, Driver, ext, job, request

from ledger.core import decide
from ledger.core.errors import InvalidRequestError
from ledger.core.events import JobLeased
from ledger.core.state import IllegalTransitionError
from ledger.core.state import evolve as evolve_job
from ledger.core.values import JobStatus
from ledger.core.workflows import decide as wf
from ledger.core.workflows.errors import (
    DEPENDENCY_UNSATISFIED,
    JOB_CANCELLED,
    RUN_CANCELLED,
    AppendConflictError,
    CompletionConflictError,
    InvalidWorkflowSpecError,
    StepNotExternalError,
    StepNotFoundError,
    WorkflowDefinitionNotFoundError,
    WorkflowIdempotencyConflictError,
    WorkflowTransitionError,
)
from ledger.core.workflows.events import (
    ReusedStep,
    WorkflowExternalStepCompleted,
    WorkflowRecovered,
    WorkflowStatusChanged,
    WorkflowStepCancelled,
    WorkflowStepReleased,
    WorkflowStepsAppended,
    WorkflowStepSucceeded,
)
from ledger.core.workflows.ids import recovery_run_id, step_job_id
from ledger.core.workflows.state import RunState, StepsNotLoadedError, evolve
from ledger.core.workflows.status import RunStatus

DIAMOND = (job("a"), job("b", "a"), job("c", "a"), job("d", "b", "c"))


def test_submit_releases_the_roots_at_once_and_blocks_the_rest_with_no_job() -> None:
    """Root job steps get their job in the submit; an external root waits; others block."""
    run = Driver(request(job("r1"), job("r2"), ext("gate"), job("x", "r1")))
    assert run.statuses() == {
        "r1": "enqueued",
        "r2": "enqueued",
        "gate": "waiting_for_external",
        "x": "blocked",
    }
    assert run.state.steps["x"].job_id is None
    enqueued = run.decisions[0].enqueue
    assert [item.step_key for item in enqueued] == ["r1", "r2"]
    assert all(item.job_id == step_job_id(run.state.run_id, item.step_key) for item in enqueued)
    assert run.state.status is RunStatus.RUNNING


def test_claims_retries_and_hand_backs_of_a_steps_job_leave_the_run_as_it_is() -> None:
    """Only an end moves a job step: claimed, retried (with the error) and handed back, it
    stays enqueued in the run with no run event (the job's own history says running and
    retried), then -> succeeded with the job's output."""
    run = Driver(request(job("a"), result_step="a"))
    before = len(run.history)
    run.start("a")
    assert run.statuses()["a"] == "enqueued"
    run.fail("a", RETRYABLE)
    assert run.job_of("a").retries == 1
    run.hand_back("a")
    assert run.statuses()["a"] == "enqueued"
    assert len(run.history) == before
    run.succeed("a", {"n": 1})
    assert run.state.steps["a"].output == {"n": 1}
    assert (run.state.status, run.state.result) == (RunStatus.SUCCEEDED, {"n": 1})
    assert run.replayed() == run.state


def test_a_dead_lettered_job_fails_its_step_and_cancels_on_success_dependents_transitively() -> (
    None
):
    """a fails -> b (on_success) cancelled as unsatisfied -> c (on_success of b) too; the run
    completes with errors."""
    run = Driver(request(job("a"), job("b", "a"), job("c", "b"), job("side")))
    run.fail("a")
    assert run.job_of("a").status is JobStatus.DEAD
    assert run.statuses() == {"a": "failed", "b": "cancelled", "c": "cancelled", "side": "enqueued"}
    assert run.state.steps["b"].code == DEPENDENCY_UNSATISFIED
    assert run.state.steps["b"].reason == "prerequisite a failed"
    assert run.state.steps["c"].reason == "prerequisite b cancelled"
    assert run.state.status is RunStatus.RUNNING
    run.succeed("side")
    assert run.state.status is RunStatus.COMPLETED_WITH_ERRORS
    assert run.state.result is None


def test_on_terminal_dependents_run_whatever_the_prerequisite_did() -> None:
    """A cleanup step on_terminal of a failed step is released; its on_success sibling is
    cancelled."""
    run = Driver(request(job("a"), job("cleanup", "a:t"), job("next", "a")))
    run.fail("a")
    assert run.statuses() == {"a": "failed", "cleanup": "enqueued", "next": "cancelled"}
    run.succeed("cleanup")
    assert run.state.status is RunStatus.COMPLETED_WITH_ERRORS


def test_on_terminal_is_released_by_a_cancelled_prerequisite_too() -> None:
    """A prerequisite cancelled as unsatisfied still ends: its on_terminal dependent runs."""
    run = Driver(request(job("a"), job("b", "a"), job("after", "b:t")))
    run.fail("a")
    assert run.statuses() == {"a": "failed", "b": "cancelled", "after": "enqueued"}


def test_fan_out_releases_every_dependent_and_fan_in_waits_for_all_and_releases_once() -> None:
    """a -> (b, c) -> d: b and c released by a; d only after both, exactly once."""
    run = Driver(request(*DIAMOND, result_step="d"))
    run.succeed("a")
    assert run.statuses() == {"a": "succeeded", "b": "enqueued", "c": "enqueued", "d": "blocked"}
    run.succeed("b")
    assert run.statuses()["d"] == "blocked"
    run.succeed("c", "c-out")
    assert run.statuses()["d"] == "enqueued"
    releases = [e for e in run.history if isinstance(e, WorkflowStepReleased) and e.step_key == "d"]
    assert len(releases) == 1
    run.succeed("d", "done")
    assert (run.state.status, run.state.result) == (RunStatus.SUCCEEDED, "done")
    assert run.replayed() == run.state


def test_a_fan_in_with_one_failed_prerequisite_is_cancelled_only_when_all_have_ended() -> None:
    """A step is resolved once nothing is pending: it is not cancelled while b still runs."""
    run = Driver(request(*DIAMOND))
    run.succeed("a")
    run.fail("b")
    assert run.statuses()["d"] == "blocked"
    run.succeed("c")
    assert run.statuses()["d"] == "cancelled"


def test_an_operator_cancel_of_a_steps_job_cancels_the_step_and_resolves_dependents() -> None:
    """job_cancelled -> step cancelled (workflow.job_cancelled), dependents unsatisfied."""
    run = Driver(request(job("a"), job("b", "a")))
    run.cancel_job("a")
    assert run.statuses() == {"a": "cancelled", "b": "cancelled"}
    assert run.state.steps["a"].code == JOB_CANCELLED
    assert run.state.status is RunStatus.COMPLETED_WITH_ERRORS


def test_a_requeue_of_a_steps_job_is_refused_pointing_at_recover() -> None:
    """A step's job is not requeued behind its run's back: the decision raises, so the
    requeue's unit of work rolls back."""
    run = Driver(request(job("a")))
    run.fail("a")
    dead = run.job_of("a")
    requeued = decide.decide_requeue(dead, T0, "again")
    with pytest.raises(WorkflowTransitionError, match="recover the run"):
        wf.decide_job_event(run.state, "a", dead.job_id, requeued, evolve_job(dead, requeued))


def test_job_events_that_do_not_move_a_step_change_nothing() -> None:
    """Heartbeats, stage changes and job_failed (its outcome follows) decide no events."""
    run = Driver(request(job("a")))
    run.start("a")
    state = run.job_of("a")
    assert state.lease is not None
    beat = decide.decide_heartbeat(state, state.lease, 30, run.tick())
    decision = wf.decide_job_event(run.state, "a", state.job_id, beat, evolve_job(state, beat))
    assert decision.events == [] and decision.state == run.state


def test_a_job_event_for_another_job_is_refused() -> None:
    """The step's job is fenced by id."""
    run = Driver(request(job("a"), job("b")))
    a = run.job_of("a")
    leased = JobLeased(at=T0, run_number=1, attempt=1, worker_id="w", lease_expires_at=T0)
    with pytest.raises(WorkflowTransitionError, match="does not run step 'b'"):
        wf.decide_job_event(run.state, "b", a.job_id, leased, evolve_job(a, leased))


# --- external steps ---------------------------------------------------------------------


def test_an_external_step_waits_after_its_prerequisites_and_completes_with_an_output() -> None:
    """blocked -> waiting_for_external once a succeeds; complete -> succeeded, releasing b.
    The run reads running while b is blocked behind the gate (SEMANTICS.md's roll-up: any
    blocked step -> running)."""
    run = Driver(request(job("a"), ext("approve", "a"), job("b", "approve"), result_step="approve"))
    assert run.statuses()["approve"] == "blocked"
    run.succeed("a")
    assert run.statuses()["approve"] == "waiting_for_external"
    assert run.state.status is RunStatus.RUNNING
    run.complete("approve", output={"by": "ann"}, reason="ok")
    assert run.statuses() == {"a": "succeeded", "approve": "succeeded", "b": "enqueued"}
    run.succeed("b")
    assert (run.state.status, run.state.result) == (RunStatus.SUCCEEDED, {"by": "ann"})


def test_a_run_whose_only_live_steps_wait_outside_is_waiting_for_external() -> None:
    """running -> waiting_for_external -> running (an append) -> succeeded."""
    run = Driver(request(job("a"), ext("approve", "a")))
    run.succeed("a")
    assert run.state.status is RunStatus.WAITING_FOR_EXTERNAL
    run.append("m", job("more"))
    assert run.state.status is RunStatus.RUNNING
    run.succeed("more")
    run.complete("approve")
    statuses = [e.status for e in run.history if isinstance(e, WorkflowStatusChanged)]
    assert statuses == ["waiting_for_external", "running", "waiting_for_external", "succeeded"]


def test_completing_twice_identically_is_idempotent_and_differently_a_conflict() -> None:
    """The same completion again decides nothing; another status, output or reason raises."""
    run = Driver(request(ext("gate"), job("b", "gate")))
    run.complete("gate", output=1, reason="r")
    again = wf.decide_complete_external(run.state, "gate", True, T0, output=1, reason="r")
    assert again.events == [] and again.enqueue == []
    for kw in ({"output": 2, "reason": "r"}, {"output": 1, "reason": "other"}):
        with pytest.raises(CompletionConflictError) as caught:
            wf.decide_complete_external(run.state, "gate", True, T0, **kw)  # type: ignore[arg-type]
        assert caught.value.code == "workflow.completion_conflict"
    with pytest.raises(CompletionConflictError):
        wf.decide_complete_external(run.state, "gate", False, T0, reason="r")


def test_a_failed_external_step_cancels_its_on_success_dependents_and_carries_no_output() -> None:
    """failed completes the step; an output with it is refused."""
    run = Driver(request(ext("gate"), job("b", "gate")))
    with pytest.raises(InvalidRequestError, match="no output"):
        wf.decide_complete_external(run.state, "gate", False, T0, output={"x": 1})
    run.complete("gate", False, reason="rejected")
    assert run.statuses() == {"gate": "failed", "b": "cancelled"}
    assert run.state.steps["gate"].output is None


def test_completing_a_job_step_an_unknown_step_or_a_blocked_one_is_a_clear_error() -> None:
    """Each names its own code."""
    run = Driver(request(job("a"), ext("gate", "a")))
    with pytest.raises(StepNotExternalError) as not_external:
        wf.decide_complete_external(run.state, "a", True, T0)
    assert not_external.value.code == "workflow.step_not_external"
    with pytest.raises(StepNotFoundError) as missing:
        wf.decide_complete_external(run.state, "zz", True, T0)
    assert missing.value.code == "workflow.step_not_found"
    with pytest.raises(WorkflowTransitionError, match="is blocked, not waiting"):
        wf.decide_complete_external(run.state, "gate", True, T0)


# --- cancel -----------------------------------------------------------------------------


def test_cancel_ends_every_live_step_cancels_live_jobs_and_releases_nothing_after() -> None:
    """Running and enqueued jobs are cancelled, blocked and waiting steps too; the job's
    cancel echoing back changes nothing; the run stays cancelled."""
    run = Driver(request(job("a"), job("b"), ext("gate"), job("c", "a"), job("done")))
    run.succeed("done")
    run.start("a")
    decision = run.cancel("operator stop")
    assert set(decision.cancel_jobs) == {run.state.steps["a"].job_id, run.state.steps["b"].job_id}
    assert run.statuses() == {
        "a": "cancelled",
        "b": "cancelled",
        "gate": "cancelled",
        "c": "cancelled",
        "done": "succeeded",
    }
    assert {run.state.steps[k].code for k in "abc"} == {RUN_CANCELLED}
    assert run.job_of("a").status is JobStatus.CANCELLED
    assert run.state.status is RunStatus.CANCELLED
    assert not [e for e in run.history[-6:] if isinstance(e, WorkflowStatusChanged)]
    assert run.replayed() == run.state


def test_cancel_is_idempotent_and_a_finished_run_refuses_it() -> None:
    """Cancelling a cancelled run decides nothing; a succeeded run is not cancelled."""
    run = Driver(request(job("a")))
    run.cancel()
    assert wf.decide_cancel(run.state, "again", T0).events == []
    done = Driver(request(job("a")))
    done.succeed("a")
    with pytest.raises(WorkflowTransitionError, match="succeeded"):
        wf.decide_cancel(done.state, "late", T0)


def test_an_external_step_cannot_be_completed_after_its_run_was_cancelled() -> None:
    """Cancel completed the waiting step as cancelled; a late approval is refused."""
    run = Driver(request(ext("gate")))
    run.cancel()
    with pytest.raises(WorkflowTransitionError, match="cancelled"):
        wf.decide_complete_external(run.state, "gate", True, T0)


# --- append -----------------------------------------------------------------------------


def test_append_adds_steps_that_depend_on_existing_ones_and_releases_the_ready() -> None:
    """New steps after a succeeded step run at once; after a live one they block; after a
    failed one (on_success) they are cancelled at once."""
    run = Driver(request(job("a"), job("slow"), job("bad")))
    run.succeed("a")
    run.fail("bad")
    decision = run.append("m1", job("x", "a"), job("y", "slow"), job("z", "bad"), job("w", "x"))
    assert [item.step_key for item in decision.enqueue] == ["x"]
    assert {k: run.statuses()[k] for k in "xyzw"} == {
        "x": "enqueued",
        "y": "blocked",
        "z": "cancelled",
        "w": "blocked",
    }
    assert run.replayed() == run.state


def test_append_is_idempotent_by_mutation_key_and_conflicts_with_other_content() -> None:
    """The same key and steps again decides nothing, even after the run finished; other
    steps under the key are workflow.append_conflicting_retry."""
    run = Driver(request(job("a")))
    run.append("m1", job("b", "a"))
    again = wf.decide_append(run.state, "m1", [job("b", "a")], DEFINITIONS, T0)
    assert again.events == []
    with pytest.raises(AppendConflictError) as caught:
        wf.decide_append(run.state, "m1", [job("b")], DEFINITIONS, T0)
    assert caught.value.code == "workflow.append_conflicting_retry"
    run.succeed("a")
    run.succeed("b")
    assert wf.decide_append(run.state, "m1", [job("b", "a")], DEFINITIONS, T0).events == []
    with pytest.raises(WorkflowTransitionError, match="append to a live run"):
        wf.decide_append(run.state, "m2", [job("c")], DEFINITIONS, T0)


def test_append_validates_like_submit_against_the_runs_steps() -> None:
    """A key the run has, an unknown prerequisite, a disabled type are refused."""
    run = Driver(request(job("a")))
    with pytest.raises(InvalidWorkflowSpecError, match="given twice"):
        wf.decide_append(run.state, "m", [job("a")], DEFINITIONS, T0)
    with pytest.raises(InvalidWorkflowSpecError, match="unknown 'q'"):
        wf.decide_append(run.state, "m", [job("b", "q")], DEFINITIONS, T0)
    with pytest.raises(WorkflowDefinitionNotFoundError):
        wf.decide_append(run.state, "m", [job("b", job_type="off")], DEFINITIONS, T0)


# --- recover ----------------------------------------------------------------------------


def test_recover_reuses_succeeded_outputs_and_reruns_from_the_step_downstream() -> None:
    """a, b succeeded, c failed, d cancelled: recovering from b re-runs b, c and d and
    reuses a's output; the new run's id follows from (source, request key)."""
    source = Driver(request(job("a"), job("b", "a"), job("c", "b"), job("d", "c"), result_step="d"))
    source.succeed("a", "A")
    source.succeed("b", "B")
    source.fail("c")
    assert source.state.status is RunStatus.COMPLETED_WITH_ERRORS
    run_id = recovery_run_id(source.state.run_id, "fix-1")
    decision = wf.decide_recover(
        run_id, source.state, from_step="b", reason="bug fixed", request_key="fix-1", now=T0
    )
    state = decision.state
    assert state.run_id == run_id
    assert {k: str(s.status) for k, s in state.steps.items()} == {
        "a": "succeeded",
        "b": "enqueued",
        "c": "blocked",
        "d": "blocked",
    }
    assert state.steps["a"].output == "A" and state.steps["a"].reused_from == source.state.run_id
    assert [item.step_key for item in decision.enqueue] == ["b"]
    assert decision.enqueue[0].job_id == step_job_id(run_id, "b")
    assert state.recovered is not None and state.recovered.reason == "bug fixed"
    wf.check_recovery_repeat(state, source.state.run_id, "b", "bug fixed")
    with pytest.raises(WorkflowIdempotencyConflictError):
        wf.check_recovery_repeat(state, source.state.run_id, "c", "bug fixed")


def test_recover_refuses_a_live_source_and_an_unknown_step() -> None:
    """Recovering a running run would run its steps twice."""
    live = Driver(request(job("a")))
    with pytest.raises(WorkflowTransitionError, match="recover a finished run"):
        wf.decide_recover(uuid4(), live.state, from_step="a", reason="r", request_key="k", now=T0)
    live.cancel()
    with pytest.raises(StepNotFoundError):
        wf.decide_recover(uuid4(), live.state, from_step="zz", reason="r", request_key="k", now=T0)


# --- the fold's refusals ----------------------------------------------------------------


def test_the_fold_refuses_histories_no_decision_writes() -> None:
    """A release before the prerequisites end, a second submit, a status the steps do not
    say, a step event for another job, an unsatisfied cancel of a satisfiable step."""
    run = Driver(request(job("a"), job("b", "a")))
    state, at = run.state, T0
    bad = [
        WorkflowStepReleased(at=at, step_key="b", job_id=uuid4()),
        run.history[0],
        WorkflowStatusChanged(at=at, status=RunStatus.SUCCEEDED),
        WorkflowStepSucceeded(at=at, step_key="a", job_id=uuid4()),  # another job
        WorkflowStepCancelled(
            at=at, step_key="b", job_id=None, code=DEPENDENCY_UNSATISFIED, reason="x"
        ),
        WorkflowStepCancelled(at=at, step_key="b", job_id=None, code=RUN_CANCELLED, reason="x"),
        WorkflowStepReleased(at=at, step_key="zz", job_id=None),
    ]
    for event in bad:
        with pytest.raises(IllegalTransitionError):
            evolve(state, event)
    with pytest.raises(IllegalTransitionError, match="before workflow_submitted"):
        evolve(None, bad[0])


def test_every_decided_history_folds_back_to_the_decided_state() -> None:
    """The decisions' own fold equals folding their events from nothing (replay)."""
    run = Driver(request(*DIAMOND, ext("gate", "d"), result_step="gate"))
    for key in "abcd":
        run.succeed(key, key.upper())
    run.complete("gate", output="ok")
    assert run.replayed() == run.state
    assert replace(run.state, version=0) != run.state


def test_the_fold_refuses_out_of_place_external_appends_and_recoveries() -> None:
    """A completion of a job step, a failed completion with an output, an append under a
    used key or to a finished run, a recovery that is not the run's second event or that
    reuses the step it re-runs."""
    run = Driver(request(job("a"), ext("gate")))
    run.append("m", job("b"))
    state, at = run.state, T0
    recovered = WorkflowRecovered(
        at=at, source_run_id=uuid4(), from_step="a", reason="r", request_key="k", reused=()
    )
    bad = [
        WorkflowExternalStepCompleted(at=at, step_key="a", succeeded=True),
        WorkflowExternalStepCompleted(at=at, step_key="gate", succeeded=False, output=1),
        WorkflowStepsAppended(at=at, mutation_key="m", steps=(ext("c"),), resolutions=()),
        recovered,
    ]
    for event in bad:
        with pytest.raises(IllegalTransitionError):
            evolve(state, event)
    first = evolve(None, run.history[0])
    reuse_from = replace(recovered, reused=(ReusedStep(key="a", output=1, source_job_id=None),))
    with pytest.raises(IllegalTransitionError, match="reuses step 'a'"):
        evolve(first, reuse_from)
    run.succeed("a")
    run.succeed("b")
    run.complete("gate")
    assert run.state.status is RunStatus.SUCCEEDED
    late = WorkflowStepsAppended(at=at, mutation_key="n", steps=(ext("x"),), resolutions=())
    with pytest.raises(IllegalTransitionError, match="append to run"):
        evolve(run.state, late)


def test_a_job_step_appended_without_its_resolution_is_refused_by_the_fold() -> None:
    """Each job step carries its frozen resolution; an external step none."""
    run = Driver(request(job("a")))
    with pytest.raises(IllegalTransitionError, match="a resolution iff a job step"):
        evolve(
            run.state,
            WorkflowStepsAppended(at=T0, mutation_key="m", steps=(job("c"),), resolutions=()),
        )


def test_a_recovered_run_runs_its_rerun_steps_to_a_result_and_replays() -> None:
    """The new run's re-run steps get jobs of its own ids; the run succeeds with the result
    step's new output; its history (submit, recovery, releases, outcomes) folds back."""
    source = Driver(request(job("a"), job("b", "a"), ext("ok", "b"), result_step="b"))
    source.succeed("a", "A")
    source.fail("b")
    run_id = recovery_run_id(source.state.run_id, "k")
    recovered = Driver(
        wf.decide_recover(
            run_id, source.state, from_step="b", reason="retry b", request_key="k", now=T0
        )
    )
    assert recovered.job_of("b").job_id == step_job_id(run_id, "b")
    assert recovered.job_of("b").job_id != source.job_of("b").job_id
    recovered.succeed("b", "B2")
    recovered.complete("ok")
    assert (recovered.state.status, recovered.state.result) == (RunStatus.SUCCEEDED, "B2")
    assert recovered.replayed() == recovered.state
    assert [e.name for e in recovered.history[:3]] == [
        "workflow_submitted",
        "workflow_recovered",
        "workflow_step_released",
    ]


# --- partial loads ---------------------------------------------------------------------------


def _partial(state: RunState, keys: set[str]) -> RunState:
    """``state`` as a store would resume it holding only ``keys``."""
    return replace(
        state,
        request=replace(state.request, steps=()),
        steps={k: s for k, s in state.steps.items() if k in keys},
        dependents={k: d for k, d in state.dependents.items() if k in keys},
        complete=False,
    )


def test_a_decision_on_a_partial_run_asks_for_the_steps_it_lacks_then_decides_the_same() -> None:
    """An end needs its step's dependents, a dependent's release its prerequisites: each
    lookup of a step not loaded raises StepsNotLoadedError naming it; with those loaded the
    events are the ones decided on the whole run."""
    run = Driver(request(*DIAMOND, result_step="d"))
    run.succeed("a")
    run.succeed("b")
    c = run.job_of("c")
    now = run.tick()
    leased = evolve_job(c, decide.decide_lease(c, "w", 30, now))
    assert leased.lease is not None
    succeeded = decide.decide_succeed(leased, leased.lease, now, output="c")
    after = evolve_job(leased, succeeded)
    whole = wf.decide_job_event(run.state, "c", c.job_id, succeeded, after)
    loaded = {"c"}
    asked = []
    while True:
        try:
            partial = wf.decide_job_event(
                _partial(run.state, loaded), "c", c.job_id, succeeded, after
            )
            break
        except StepsNotLoadedError as missing:
            asked.append(set(missing.keys))
            loaded |= set(missing.keys)
    assert asked[0] == {"d"}  # c's dependent, counted down
    assert partial.events == whole.events and partial.enqueue == whole.enqueue
    assert loaded == {"b", "c", "d"}  # a, done long ago, is never looked at


def test_walking_commands_refuse_a_partial_run() -> None:
    """Cancel, append and an idempotent repeat walk every step: a partial run asks for all."""
    run = Driver(request(*DIAMOND))
    partial = _partial(run.state, {"a"})
    with pytest.raises(StepsNotLoadedError) as raised:
        wf.decide_cancel(partial, "stop", T0)
    assert raised.value.whole
    with pytest.raises(StepsNotLoadedError):
        wf.decide_append(partial, "k", [job("e", "a")], DEFINITIONS, T0)
