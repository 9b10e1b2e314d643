"""Workflow runs through the store on PostgreSQL: the cost of one step's end against the
run's size, and a fan-out/fan-in run end to end through a WorkerPool next to plain jobs.

    .venv/bin/python bench/bench_workflow_run.py [--width 998] [--repeat 3] [--concurrency 16]

Creates a scratch database on the local server (``--admin``), drops it at the end.

1. **Per-step end cost**: runs of one root and N parallel steps (N = 10, then 1,000); the
   root is worked, then ``--sample`` of the parallel steps are claimed and succeeded one per
   transaction (``Ledger.succeed``: the job's row, the run's release lock, the run's row,
   the step's and its dependents' rows). Prints the mean ms per step end for each N (wall,
   and this process's CPU), and the same for plain jobs: the partial loads should keep the
   two runs' figures close.
2. **End to end**: a run of one root, ``--width`` parallel steps and one sink (1,000 steps
   by default) worked by a WorkerPool until idle, and ``width + 2`` plain jobs worked the
   same way, then again with the store's policies off (what the default workflow policy
   costs plain jobs), alternating, ``--repeat`` times. Prints steps/s and jobs/s.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
import uuid
from typing import Any

import psycopg

from ledger import Ledger
from ledger.core.values import EnqueueRequest
from ledger.runtime.handlers import Registry
from ledger.testing import run_until_idle

POLL = [0.1]


def fan(width: int, *, sink: bool) -> dict[str, Any]:
    middle = [f"m{i}" for i in range(width)]
    steps: list[dict[str, Any]] = [{"kind": "job", "key": "root", "job_type": "work"}]
    steps += [
        {"kind": "job", "key": key, "job_type": "work", "depends_on": [{"step": "root"}]}
        for key in middle
    ]
    if sink:
        steps.append(
            {
                "kind": "job",
                "key": "sink",
                "job_type": "work",
                "depends_on": [{"step": key} for key in middle],
            }
        )
    return {"workflow_type": "bench", "steps": steps, "result_step": "sink" if sink else None}


def registry() -> Registry:
    handlers = Registry()

    @handlers.handler("work")
    async def work(ctx: Any) -> None:
        return None

    return handlers


def step_end_ms(ledger: Ledger, width: int, sample: int) -> tuple[float, float]:
    """Mean ms of one parallel step's end (claim excluded), one per transaction: wall time,
    and this process's CPU time (the client's share, which the host's load disturbs less)."""
    sample = min(sample, width)
    run = ledger.workflows.submit(fan(width, sink=False)).run_id
    [root] = ledger.claim("bench", lease_s=600)
    assert root.lease is not None
    ledger.succeed(root.lease)
    claimed = ledger.claim("bench", limit=sample, lease_s=600)
    times, cpu = [], []
    for state in claimed:
        assert state.lease is not None
        started, started_cpu = time.perf_counter(), time.process_time()
        ledger.succeed(state.lease)
        times.append(time.perf_counter() - started)
        cpu.append(time.process_time() - started_cpu)
    assert sum(
        1 for step in ledger.workflows.handle(run).steps() if step.status == "succeeded"
    ) == (sample + 1)
    if not ledger.workflows.handle(run).status().is_finished:
        ledger.workflows.cancel(run, "measured")  # its other jobs must not be claimed next
    return statistics.mean(times) * 1e3, statistics.mean(cpu) * 1e3


def plain_end_ms(ledger: Ledger, sample: int) -> tuple[float, float]:
    """The same measure for plain jobs' ends: the floor a step's end adds its run's work to."""
    ledger.enqueue_many([EnqueueRequest(job_type="work", payload={}) for _ in range(sample)])
    times, cpu = [], []
    for state in ledger.claim("bench", limit=sample, lease_s=600):
        assert state.lease is not None
        started, started_cpu = time.perf_counter(), time.process_time()
        ledger.succeed(state.lease)
        times.append(time.perf_counter() - started)
        cpu.append(time.process_time() - started_cpu)
    return statistics.mean(times) * 1e3, statistics.mean(cpu) * 1e3


async def plain_jobs_s(ledger: Ledger, count: int, concurrency: int) -> float:
    started = time.perf_counter()
    ledger.enqueue_many([EnqueueRequest(job_type="work", payload={}) for _ in range(count)])
    await run_until_idle(ledger, registry(), concurrency=concurrency, poll_interval_s=POLL[0])
    return count / (time.perf_counter() - started)


async def end_to_end(ledger: Ledger, width: int, concurrency: int) -> tuple[float, float, float]:
    """(steps/s of one fan-out/fan-in run, jobs/s of as many plain jobs, and of as many
    with the store's policies off: what the default workflow policy costs plain jobs),
    each worked by a WorkerPool until idle."""
    started = time.perf_counter()
    run = ledger.workflows.submit(fan(width, sink=True)).run_id
    await run_until_idle(ledger, registry(), concurrency=concurrency, poll_interval_s=POLL[0])
    steps_s = (width + 2) / (time.perf_counter() - started)
    assert str(ledger.workflows.handle(run).status()) == "succeeded"
    jobs_s = await plain_jobs_s(ledger, width + 2, concurrency)
    policies = ledger.store.policies
    ledger.store.policies = ()
    try:
        no_policy_s = await plain_jobs_s(ledger, width + 2, concurrency)
    finally:
        ledger.store.policies = policies
    return steps_s, jobs_s, no_policy_s


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--admin", default="postgresql://postgres@127.0.0.1:5432/postgres")
    parser.add_argument("--width", type=int, default=998)
    parser.add_argument("--sample", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument(
        "--poll",
        type=float,
        default=0.1,
        help="the pool's poll interval (s): its idle check waits one, which at the default "
        "1 s would be most of a 1,000-job run",
    )
    parser.add_argument("--rounds", type=int, default=2, help="rounds of the per-step part")
    args = parser.parse_args()
    POLL[0] = args.poll
    name = f"jl_bench_wf_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(args.admin, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    url = args.admin.rsplit("/", 1)[0] + f"/{name}"
    try:
        with Ledger.open(url, create=True) as ledger:
            ledger.define("work")
            for width in (10, 1000) * args.rounds:
                wall, cpu = step_end_ms(ledger, width, args.sample)
                taken = min(args.sample, width)
                print(
                    f"step end in a {width + 1}-step run: {wall:.2f} ms wall, {cpu:.2f} ms "
                    f"client CPU (mean of {taken})"
                )
            wall, cpu = plain_end_ms(ledger, args.sample)
            print(f"plain job end: {wall:.2f} ms wall, {cpu:.2f} ms client CPU")
            for _ in range(args.repeat):
                steps_s, jobs_s, bare_s = asyncio.run(
                    end_to_end(ledger, args.width, args.concurrency)
                )
                print(
                    f"{args.width + 2}-step fan-out/fan-in run: {steps_s:,.0f} steps/s; "
                    f"{args.width + 2} plain jobs: {jobs_s:,.0f} jobs/s "
                    f"({bare_s:,.0f} jobs/s with policies off)"
                )
            report = ledger.projections().verify()
            print(f"projections verify over {report.events:,} events: clean={report.clean}")
    finally:
        with psycopg.connect(args.admin, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


if __name__ == "__main__":
    main()
