"""Random DAGs through the store (SQLite): whatever the shape, the modes, the order the steps
end in, when steps are appended and whether the run is cancelled, the workflow view's rows
equal a pure fold of the run's stored history, the steps end as the reference model says,
and ``projections verify`` and the replay check hold."""

from __future__ import annotations

import tempfile
from pathlib import Path
from uuid import UUID

from hypothesis import given, settings
from hypothesis import strategies as st
from store_helpers import assert_history_holds
from test_workflow_property import LIVE, Plan, plans, reference, to_request

from ledger import FakeClock, Ledger
from ledger.core.state import JobState
from ledger.core.values import BackoffPolicy, Failure, FailureKind
from ledger.core.workflows.spec import WorkflowRequest
from ledger.core.workflows.state import fold

RETRY = Failure(kind=FailureKind.RETRYABLE, code="flaky", message="again")
DEAD = Failure(kind=FailureKind.TERMINAL, code="broken", message="no")


class StoreDriver:
    """Moves each step of a run in the store towards its planned outcome through the API."""

    def __init__(self, ledger: Ledger, clock: FakeClock, run_id: UUID) -> None:
        self.ledger = ledger
        self.clock = clock
        self.run_id = run_id
        self.leases: dict[UUID, JobState] = {}
        self.retries: dict[str, int] = {}

    def statuses(self) -> dict[str, str]:
        return {s.key: s.status.value for s in self.ledger.workflows.handle(self.run_id).steps()}

    def act(self, plan: Plan) -> None:
        if plan.external:
            self.ledger.workflows.complete_step(self.run_id, plan.key, plan.outcome == "succeeded")
            return
        job_id = next(
            s.job_id for s in self.ledger.workflows.handle(self.run_id).steps() if s.key == plan.key
        )
        assert job_id is not None
        if job_id not in self.leases:
            for state in self.ledger.claim("w", limit=100, lease_s=600_000):
                self.leases[state.job_id] = state
        claimed = self.leases.pop(job_id)
        assert claimed.lease is not None
        if self.retries.get(plan.key, 0) < plan.retries:
            self.retries[plan.key] = self.retries.get(plan.key, 0) + 1
            self.ledger.fail(claimed.lease, RETRY)
            self.clock.advance(2)  # past the 1 s backoff
        elif plan.outcome == "succeeded":
            self.ledger.succeed(claimed.lease, output=f"out-{plan.key}")
        elif plan.outcome == "failed":
            self.ledger.fail(claimed.lease, DEAD)
        else:
            self.ledger.cancel(job_id, reason="operator")


@settings(max_examples=25, deadline=None)
@given(
    plans(),
    st.lists(st.integers(0, 50), max_size=40),
    st.none() | st.integers(0, 20),
    st.integers(0, 12),
)
def test_random_runs_through_the_store_match_the_fold_and_the_model(
    drawn: tuple[list[Plan], int, str | None],
    picks: list[int],
    cancel_at: int | None,
    append_at: int,
) -> None:
    """The view equals the fold of the stored run stream; statuses follow the model."""
    plan, split, result_step = drawn
    by_key = {p.key: p for p in plan}
    clock = FakeClock()
    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite:///{Path(tmp) / 'ledger.db'}"
        with Ledger.open(url, create=True, clock=clock) as ledger:
            ledger.define("work", backoff=BackoffPolicy(base_s=1.0, max_s=1.0, jitter=0.0))
            request = WorkflowRequest(
                workflow_type="property",
                steps=tuple(to_request(plan[:split])),
                result_step=result_step,
            )
            run_id = ledger.workflows.submit(request).run_id
            driver = StoreDriver(ledger, clock, run_id)
            late, turn, cancelled = plan[split:], 0, False
            while True:
                live = [key for key, status in driver.statuses().items() if status in LIVE]
                if not live:
                    break
                if late and turn >= append_at:
                    ledger.workflows.append_steps(run_id, to_request(late), "late")
                    late = []
                    continue
                if cancel_at is not None and turn == cancel_at:
                    ledger.workflows.cancel(run_id, "property")
                    cancelled = True
                    break
                pick = picks[turn % len(picks)] if picks else 0
                driver.act(by_key[live[pick % len(live)]])
                turn += 1

            folded = fold(r.event for r in ledger.workflows.history(run_id))  # type: ignore[misc]
            assert folded is not None
            view = ledger.workflows.handle(run_id).view()
            assert (view.status, view.result, view.version) == (
                folded.status,
                folded.result,
                folded.version,
            )
            rows = {s.key: s for s in ledger.workflows.handle(run_id).steps()}
            assert list(rows) == list(folded.steps)
            for key, step in folded.steps.items():
                shown = rows[key]
                assert (shown.status, shown.job_id, shown.output, shown.code) == (
                    step.status,
                    step.job_id,
                    step.output,
                    step.code,
                )
            if not cancelled:
                statuses, status, _ = reference(plan[: len(folded.steps)], result_step)
                assert {k: str(s.status) for k, s in folded.steps.items()} == statuses
                assert str(folded.status) == status
            assert_history_holds(ledger)
