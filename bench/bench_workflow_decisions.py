"""The pure workflow decisions in memory: a fan-out/fan-in run (one root, ``--width``
parallel steps, one sink) decided end to end, each step's job moved through the real job
decisions and fold (enqueue, lease, succeed) and its events fed back to the run, as the
policy will. No database: this is the ceiling the store's wiring adds its writes to.

    .venv/bin/python bench/bench_workflow_decisions.py [--width 1000] [--repeat 3]

Prints, per repeat: submit time, time for every step's outcome, steps/s, the run's event
count, the fold of its history from nothing, and the folded state's size as msgpack.
"""

from __future__ import annotations

import argparse
import time
from datetime import UTC, datetime, timedelta
from uuid import uuid4

import msgspec

from ledger.core import decide
from ledger.core.state import evolve
from ledger.core.values import JobDefinition
from ledger.core.workflows.decide import decide_job_event, decide_submit
from ledger.core.workflows.events import WorkflowEvent
from ledger.core.workflows.spec import Dependency, JobStep, WorkflowRequest
from ledger.core.workflows.state import RunState, fold

T0 = datetime(2026, 1, 1, tzinfo=UTC)
DEFINITIONS = {"work": JobDefinition(job_type="work")}


def fan_out_fan_in(width: int) -> WorkflowRequest:
    middle = [f"m{i}" for i in range(width)]
    steps = [
        JobStep(key="root", job_type="work"),
        *(JobStep(key=k, job_type="work", depends_on=(Dependency(step="root"),)) for k in middle),
        JobStep(key="sink", job_type="work", depends_on=tuple(Dependency(step=k) for k in middle)),
    ]
    return WorkflowRequest(workflow_type="bench", steps=tuple(steps), result_step="sink")


def run_once(width: int) -> str:
    history: list[WorkflowEvent] = []
    done = 0
    started = time.perf_counter()
    decision = decide_submit(uuid4(), fan_out_fan_in(width), DEFINITIONS, T0)
    submitted = time.perf_counter() - started
    state: RunState = decision.state
    history.extend(decision.events)
    ready = [(item.step_key, evolve(None, item.enqueued)) for item in decision.enqueue]
    now = T0
    started = time.perf_counter()
    while ready:
        key, job = ready.pop()
        now += timedelta(milliseconds=1)
        leased = decide.decide_lease(job, "w", 30, now)
        job = evolve(job, leased)
        assert job.lease is not None
        succeeded = decide.decide_succeed(job, job.lease, now, output=key)
        for event, after in ((leased, job), (succeeded, evolve(job, succeeded))):
            decision = decide_job_event(state, key, job.job_id, event, after)
            state = decision.state
            history.extend(decision.events)
            ready.extend((i.step_key, evolve(None, i.enqueued)) for i in decision.enqueue)
        done += 1
    outcomes = time.perf_counter() - started
    started = time.perf_counter()
    assert fold(history) == state
    folded = time.perf_counter() - started
    steps = width + 2
    assert str(state.status) == "succeeded" and done == steps
    size = len(msgspec.msgpack.encode(state)) / 1024
    return (
        f"{steps} steps: submit {submitted * 1e3:.0f} ms, outcomes {outcomes * 1e3:.0f} ms "
        f"({steps / outcomes:,.0f} steps/s), {len(history)} run events, "
        f"fold {folded * 1e3:.0f} ms, state {size:.0f} KiB"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--width", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    for _ in range(args.repeat):
        print(run_once(args.width))


if __name__ == "__main__":
    main()
