"""Workflow runs through a real store, on both backends: submitted, worked by a real pool,
failed, gated, cancelled, grown and recovered through the library API; each ends with the
views equal to a fold of the history and the decisions replaying clean."""

from __future__ import annotations

import pytest
from store_helpers import assert_history_holds, ext, job, registry, spec, statuses

from ledger import FakeClock, JobStatus, Ledger
from ledger.core.errors import LedgerError
from ledger.core.values import Failure, FailureKind
from ledger.core.workflows.errors import (
    AppendConflictError,
    CompletionConflictError,
    StepNotExternalError,
    WorkflowIdempotencyConflictError,
    WorkflowTransitionError,
)
from ledger.core.workflows.events import WorkflowStepReleased
from ledger.core.workflows.ids import step_job_id
from ledger.core.workflows.status import RunStatus
from ledger.testing import drain, run_until_idle

FAN = 20


@pytest.fixture
def wf(ledger: Ledger) -> Ledger:
    ledger.define("work", max_attempts=2)
    return ledger


async def test_a_fan_out_fan_in_run_is_worked_by_a_pool_to_its_result(wf: Ledger) -> None:
    """root -> 20 parallel steps -> sink: a real WorkerPool works every step's job, the sink
    is released once, after all 20, and the run succeeds with the sink's output."""
    middle = [job(f"m{i}", "root") for i in range(FAN)]
    started = wf.workflows.submit(
        spec(job("root"), *middle, job("sink", *(f"m{i}" for i in range(FAN))), result_step="sink")
    )
    assert started.created
    stats = await run_until_idle(wf, registry(), concurrency=4)
    assert stats.succeeded == FAN + 2
    handle = wf.workflows.handle(started.run_id)
    assert (handle.status(), handle.result()) == (RunStatus.SUCCEEDED, {"key": "sink"})
    assert set(statuses(wf, started.run_id).values()) == {"succeeded"}
    events = [r.event for r in wf.workflows.history(started.run_id)]
    releases = [e for e in events if isinstance(e, WorkflowStepReleased) and e.step_key == "sink"]
    assert len(releases) == 1
    sink = wf.get(step_job_id(started.run_id, "sink"))
    assert sink is not None and sink.workflow is not None
    assert sink.workflow.step_key == "sink"
    assert handle.wait(0) is RunStatus.SUCCEEDED
    assert_history_holds(wf)


async def test_a_dead_letter_fails_its_step_cancels_on_success_and_releases_on_terminal(
    wf: Ledger,
) -> None:
    """a dead-lettered: b (on_success of a) and c (on_success of b) cancelled as unsatisfied,
    transitively; cleanup (on_terminal of a) runs; the run completes with errors."""
    started = wf.workflows.submit(
        spec(job("a"), job("b", "a"), job("c", "b"), job("cleanup", "a:t"))
    )
    await drain(wf, registry(failing=frozenset({"a"})))
    run = started.run_id
    assert statuses(wf, run) == {
        "a": "failed",
        "b": "cancelled",
        "c": "cancelled",
        "cleanup": "succeeded",
    }
    steps = {step.key: step for step in wf.workflows.handle(run).steps()}
    assert steps["b"].code == "workflow.dependency_unsatisfied"
    assert steps["c"].reason == "prerequisite b cancelled"
    assert steps["a"].failure is not None and steps["a"].job_id is not None
    assert wf.workflows.handle(run).status() is RunStatus.COMPLETED_WITH_ERRORS
    assert wf.get(step_job_id(run, "b")) is None  # never released: no job
    assert_history_holds(wf)


async def test_an_external_gate_is_completed_through_the_api(wf: Ledger) -> None:
    """approve waits after a; complete releases b; the identical completion again changes
    nothing, another conflicts, and completing a job step is a clear error."""
    started = wf.workflows.submit(spec(job("a"), ext("approve", "a"), job("b", "approve")))
    run = started.run_id
    await drain(wf, registry())
    assert statuses(wf, run)["approve"] == "waiting_for_external"
    assert wf.workflows.handle(run).status() is RunStatus.RUNNING  # b is blocked behind the gate
    with pytest.raises(StepNotExternalError, match="job step"):
        wf.workflows.complete_step(run, "a", True)
    wf.workflows.complete_step(run, "approve", True, output={"by": "ann"}, reason="ok")
    version = wf.workflows.handle(run).view().version
    wf.workflows.complete_step(run, "approve", True, output={"by": "ann"}, reason="ok")
    assert wf.workflows.handle(run).view().version == version
    with pytest.raises(CompletionConflictError):
        wf.workflows.complete_step(run, "approve", False, reason="changed my mind")
    assert statuses(wf, run)["b"] == "enqueued"
    await drain(wf, registry())
    assert wf.workflows.handle(run).status() is RunStatus.SUCCEEDED
    assert_history_holds(wf)


def test_cancelling_a_run_cancels_its_running_job_and_fences_the_late_success(
    wf: Ledger,
) -> None:
    """A running step's job is cancelled with its run; the worker's later success is
    refused; blocked steps are cancelled with no job; a second cancel changes nothing."""
    started = wf.workflows.submit(spec(job("a"), job("b", "a")))
    run = started.run_id
    [claimed] = wf.claim("w1", lease_s=60)
    assert statuses(wf, run)["a"] == "running"  # from the job's own history
    wf.workflows.cancel(run, "no longer needed")
    assert statuses(wf, run) == {"a": "cancelled", "b": "cancelled"}
    job_a = wf.get(claimed.job_id)
    assert job_a is not None and job_a.status is JobStatus.CANCELLED
    assert claimed.lease is not None
    with pytest.raises(LedgerError):
        wf.succeed(claimed.lease, output={"late": True})
    version = wf.workflows.handle(run).view().version
    wf.workflows.cancel(run, "again")
    assert wf.workflows.handle(run).view().version == version
    assert wf.workflows.handle(run).status() is RunStatus.CANCELLED
    assert_history_holds(wf)


async def test_appended_steps_run_and_an_append_is_idempotent_by_its_mutation_key(
    wf: Ledger,
) -> None:
    """A gate keeps the run live; appended steps depending on a finished step are released
    at once; the same key and steps again change nothing, other steps under it conflict."""
    started = wf.workflows.submit(spec(job("a"), ext("hold", "a")))
    run = started.run_id
    await drain(wf, registry())
    wf.workflows.append_steps(run, [job("late", "a")], "grow-1")
    version = wf.workflows.handle(run).view().version
    wf.workflows.append_steps(run, [job("late", "a")], "grow-1")
    assert wf.workflows.handle(run).view().version == version
    with pytest.raises(AppendConflictError):
        wf.workflows.append_steps(run, [job("other", "a")], "grow-1")
    assert statuses(wf, run)["late"] == "enqueued"
    await drain(wf, registry())
    wf.workflows.complete_step(run, "hold", True)
    assert wf.workflows.handle(run).status() is RunStatus.SUCCEEDED
    assert_history_holds(wf)


async def test_a_recovery_reruns_from_a_step_and_reuses_the_other_outputs(wf: Ledger) -> None:
    """a -> b -> c with b failing: recovering from b re-runs b and c with new jobs, reuses
    a's output, and the same request key again returns the same run."""
    source = wf.workflows.submit(spec(job("a"), job("b", "a"), job("c", "b"), result_step="c"))
    await drain(wf, registry(failing=frozenset({"b"})))
    assert wf.workflows.handle(source.run_id).status() is RunStatus.COMPLETED_WITH_ERRORS
    with pytest.raises(WorkflowTransitionError):
        wf.workflows.cancel(source.run_id, "finished already")
    recovered = wf.workflows.recover(source.run_id, "b", "fixed b", "retry-1")
    assert recovered.created
    assert wf.workflows.recover(source.run_id, "b", "fixed b", "retry-1") == (
        recovered.run_id,
        False,
    )
    assert statuses(wf, recovered.run_id) == {"a": "succeeded", "b": "enqueued", "c": "blocked"}
    await drain(wf, registry())
    handle = wf.workflows.handle(recovered.run_id)
    assert (handle.status(), handle.result()) == (RunStatus.SUCCEEDED, {"key": "c"})
    assert handle.view().recovered_from == source.run_id
    assert_history_holds(wf)


def test_an_idempotent_start_returns_the_same_run_and_another_request_conflicts(
    wf: Ledger,
) -> None:
    """Same key, same request: the same run, nothing written; another request: a conflict."""
    first = wf.workflows.submit(spec(job("a"), idempotency_key="k1", org="acme"))
    again = wf.workflows.submit(spec(job("a"), idempotency_key="k1", org="acme"))
    assert again == (first.run_id, False)
    with pytest.raises(WorkflowIdempotencyConflictError):
        wf.workflows.submit(spec(job("b"), idempotency_key="k1", org="acme"))
    page = wf.workflows.runs(org="acme")
    assert [run.run_id for run in page.runs] == [first.run_id]
    assert_history_holds(wf)


def test_requeueing_a_steps_job_is_refused_and_rolls_back(wf: Ledger, clock: FakeClock) -> None:
    """A step's dead job is not requeued (recover the run instead): clear error, nothing
    written."""
    started = wf.workflows.submit(spec(job("a", max_attempts=1)))
    [claimed] = wf.claim("w1")
    assert claimed.lease is not None
    wf.fail(claimed.lease, Failure(kind=FailureKind.TERMINAL, code="x", message="boom"))
    assert statuses(wf, started.run_id) == {"a": "failed"}
    with pytest.raises(WorkflowTransitionError, match="recover the run"):
        wf.requeue(claimed.job_id)
    state = wf.get(claimed.job_id)
    assert state is not None and state.status is JobStatus.DEAD
    assert_history_holds(wf)


def test_runs_are_listed_by_type_status_and_org_a_page_at_a_time(
    wf: Ledger, clock: FakeClock
) -> None:
    """Filters narrow the listing; the cursor walks it in submit order."""
    ids = []
    for _ in range(3):
        ids.append(wf.workflows.submit(spec(job("a"), org="acme")).run_id)
        clock.advance(1)
    wf.workflows.submit(spec(job("a"), org="other"))
    first = wf.workflows.runs(org="acme", limit=2)
    assert [r.run_id for r in first.runs] == ids[:2] and first.next_cursor is not None
    rest = wf.workflows.runs(org="acme", limit=2, cursor=first.next_cursor)
    assert [r.run_id for r in rest.runs] == ids[2:] and rest.next_cursor is None
    assert wf.workflows.runs(status="succeeded").runs == []
    assert len(wf.workflows.runs(workflow_type="test", status="running").runs) == 4
