"""Random DAGs and random step outcomes: the run the decisions leave equals a deliberately
simple reference model (written here, sharing no code with the core), and the history the
decisions wrote folds back to that run."""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import event, given, settings
from hypothesis import strategies as st
from workflow_helpers import RETRYABLE, Driver, request

from ledger.core.workflows.events import WorkflowStepReleased
from ledger.core.workflows.ids import step_job_id
from ledger.core.workflows.spec import (
    Dependency,
    ExternalStep,
    JobStep,
    ReleaseMode,
    StepRequest,
)


@dataclass(frozen=True)
class Plan:
    """One step of a random run: its prerequisites, and what will happen to it."""

    key: str
    external: bool
    deps: tuple[tuple[str, bool], ...]  # (prerequisite, on_terminal)
    retries: int  # failed attempts before the final outcome (job steps)
    outcome: str  # "succeeded" | "failed" | "cancelled" (a job's operator cancel)


@st.composite
def plans(draw: st.DrawFn) -> tuple[list[Plan], int, str | None]:
    """Steps in an order where each depends only on earlier ones (so a DAG), how many of
    them are submitted (the rest are appended later), and the result step."""
    size = draw(st.integers(1, 9))
    out = []
    for i in range(size):
        key = f"s{i}"
        external = draw(st.booleans()) and draw(st.booleans())
        before = draw(st.sets(st.integers(0, i - 1), max_size=3)) if i else set()
        deps = tuple((f"s{j}", draw(st.booleans())) for j in sorted(before))
        choices = ["succeeded", "failed"] if external else ["succeeded", "failed", "cancelled"]
        outcome = draw(st.sampled_from(choices))
        retries = 0 if external else draw(st.integers(0, 2))
        out.append(Plan(key, external, deps, retries, outcome))
    split = draw(st.integers(1, size))
    result = draw(st.none() | st.sampled_from([p.key for p in out[:split]]))
    return out, split, result


def reference(plan: list[Plan], result_step: str | None) -> tuple[dict[str, str], str, object]:
    """Statuses by a fixpoint: a step whose prerequisites all ended gets its own outcome,
    unless an on_success prerequisite did not succeed (then cancelled)."""
    final: dict[str, str] = {}
    changed = True
    while changed:
        changed = False
        for p in plan:
            if p.key in final or any(d not in final for d, _ in p.deps):
                continue
            let_down = any(not t and final[d] != "succeeded" for d, t in p.deps)
            final[p.key] = "cancelled" if let_down else p.outcome
            changed = True
    ok = all(status == "succeeded" for status in final.values())
    run = "succeeded" if ok else "completed_with_errors"
    result = f"out-{result_step}" if ok and result_step is not None else None
    return final, run, result


def to_request(plan: list[Plan]) -> list[StepRequest]:
    steps: list[StepRequest] = []
    for p in plan:
        deps = tuple(
            Dependency(step=d, mode=ReleaseMode.ON_TERMINAL if t else ReleaseMode.ON_SUCCESS)
            for d, t in p.deps
        )
        if p.external:
            steps.append(ExternalStep(key=p.key, depends_on=deps))
        else:
            steps.append(
                JobStep(key=p.key, job_type="work", max_attempts=p.retries + 1, depends_on=deps)
            )
    return steps


def act(run: Driver, p: Plan, done_retries: dict[str, int]) -> None:
    """Move step ``p`` one step towards its planned outcome."""
    if p.external:
        run.complete(p.key, p.outcome == "succeeded")
        return
    if done_retries.get(p.key, 0) < p.retries:
        done_retries[p.key] = done_retries.get(p.key, 0) + 1
        run.fail(p.key, RETRYABLE)
    elif p.outcome == "succeeded":
        run.succeed(p.key, f"out-{p.key}")
    elif p.outcome == "failed":
        run.fail(p.key)
    else:
        run.cancel_job(p.key)


LIVE = ("enqueued", "running", "waiting_for_external")


@settings(max_examples=300, deadline=None)
@given(
    plans(),
    st.lists(st.integers(0, 50), max_size=60),
    st.none() | st.integers(0, 30),
    st.integers(0, 20),
)
def test_random_runs_end_as_the_reference_model_says(
    drawn: tuple[list[Plan], int, str | None],
    picks: list[int],
    cancel_at: int | None,
    append_at: int,
) -> None:
    """Whatever the DAG, the modes, the order steps end in and when the later steps are
    appended, each step ends as the model says, each is released at most once with its
    derived job id, the run's status and result follow, and folding the history gives the
    same run."""
    plan, split, result_step = drawn
    by_key = {p.key: p for p in plan}
    run = Driver(request(*to_request(plan[:split]), result_step=result_step))
    late = plan[split:]
    retries: dict[str, int] = {}
    turn = 0
    cancelled_from: dict[str, str] | None = None
    while True:
        live = [key for key, status in run.statuses().items() if status in LIVE]
        if not live:
            break  # the run has finished: a later append would be refused
        if late and turn >= append_at:
            run.append("late", *to_request(late))
            event("appended")
            late = []
            continue
        if cancel_at is not None and turn == cancel_at:
            cancelled_from = run.statuses()
            run.cancel("property")
            break
        pick = picks[turn % len(picks)] if picks else 0
        act(run, by_key[live[pick % len(live)]], retries)
        turn += 1

    releases = [e.step_key for e in run.history if isinstance(e, WorkflowStepReleased)]
    assert len(releases) == len(set(releases))
    for key in releases:
        expected = None if by_key[key].external else step_job_id(run.state.run_id, key)
        assert run.state.steps[key].job_id == expected
    assert run.replayed() == run.state

    if cancelled_from is not None:
        assert str(run.state.status) == "cancelled"
        for key, before in cancelled_from.items():
            terminal = before in ("succeeded", "failed", "cancelled")
            assert run.statuses()[key] == (before if terminal else "cancelled")
        return
    statuses, status, result = reference(plan[: len(run.state.steps)], result_step)
    assert run.statuses() == statuses
    assert str(run.state.status) == status
    if result_step is not None and by_key[result_step].external:
        result = None  # completed here without an output
    assert run.state.result == result
