"""``jobledger demo``: a realistic mix of jobs, worked to completion, on the embedded default.

Built-in handlers: ``demo.email`` succeeds; ``demo.flaky`` fails transiently before it
succeeds; ``demo.broken`` fails permanently; ``demo.report`` is slow, reports its stages and
progress, and heartbeats. Beside the mix it runs a small workflow (:mod:`cli.demo_workflow`):
a fan-out of fetches, a fan-in merge, an approval gate the demo completes, a publish.
Everything it does is in the ledger afterwards, to be explored with
``history``, ``show`` and the rest.
"""

from __future__ import annotations

import asyncio
import io
import random
import shlex
import time
from dataclasses import asdict, dataclass
from uuid import UUID

import click

from . import demo_workflow
from .database import Settings, describe
from .invocation import program
from .progress import progress_file
from .render import echo_json, json_option
from ledger.api.ledger import Ledger
from ledger.core.values import BackoffPolicy, EnqueueRequest, JobStatus
from ledger.runtime.handlers import JobContext, PermanentError, Registry, TransientError
from ledger.runtime.pool import WorkerPool

registry = Registry()
demo_workflow.register(registry)

QUICK_RETRY = BackoffPolicy(base_s=0.2, max_s=1.0, jitter=0.25)


@registry.handler("demo.email", max_attempts=3)
async def send_email(ctx: JobContext) -> dict[str, str]:
    await asyncio.sleep(0.002)
    return {"sent_to": str(ctx.payload["to"])}


@registry.handler("demo.flaky", max_attempts=5, backoff=QUICK_RETRY)
async def call_flaky_api(ctx: JobContext) -> dict[str, int]:
    failures = int(ctx.payload["fails"])
    if ctx.attempt <= failures:
        raise TransientError(f"upstream answered 503 (attempt {ctx.attempt})", code="http.503")
    return {"status": 200, "attempts": ctx.attempt}


@registry.handler("demo.broken", max_attempts=3, backoff=QUICK_RETRY)
async def parse_invoice(ctx: JobContext) -> None:
    raise PermanentError(f"invoice {ctx.payload['invoice']} has no total", code="invoice.malformed")


@registry.handler("demo.report", max_attempts=3, backoff=QUICK_RETRY)
async def build_report(ctx: JobContext) -> dict[str, int]:
    stages = ("running", "querying", "rendering", "uploading")
    for done, stage in enumerate(stages, start=1):
        await ctx.progress(stage=stage, done=done, total=len(stages), checkpoint={"step": done})
        await asyncio.sleep(0.02)
        await ctx.heartbeat()
    return {"pages": int(ctx.payload["pages"])}


def demo_requests(count: int, rng: random.Random) -> list[EnqueueRequest]:
    """70% email, 15% flaky, 10% report, 5% broken, in a shuffled order."""
    requests = []
    for i in range(count):
        roll = rng.random()
        if roll < 0.70:
            requests.append(
                EnqueueRequest(job_type="demo.email", payload={"to": f"user{i}@example.com"})
            )
        elif roll < 0.85:
            fails = rng.randint(1, 2)
            requests.append(EnqueueRequest(job_type="demo.flaky", payload={"fails": fails}))
        elif roll < 0.95:
            requests.append(
                EnqueueRequest(
                    job_type="demo.report", payload={"pages": rng.randint(2, 9)}, priority=50
                )
            )
        else:
            requests.append(EnqueueRequest(job_type="demo.broken", payload={"invoice": f"INV-{i}"}))
    return requests


@dataclass
class DemoSummary:
    jobs: int
    succeeded: int
    retried: int
    dead: int
    events_written: int
    elapsed_s: float
    example_retried: str | None
    example_dead: str | None
    example_report: str | None
    workflow: demo_workflow.WorkflowSummary


async def _work(
    ledger: Ledger, ids: list[UUID], run_id: UUID, concurrency: int, show: bool
) -> None:
    # demo.flaky fails on purpose, often several times in a row: with the default breaker
    # (5 in a row pause the type for 60 s) the demo would sit out a cooldown, showing nothing.
    pool = WorkerPool(
        ledger, registry, concurrency=concurrency, poll_interval_s=0.05, breaker_threshold=1_000
    )
    await pool.start()
    try:
        total = len(ids) + demo_workflow.JOB_STEPS
        with click.progressbar(
            length=total,
            label="working",
            file=progress_file() if show else io.StringIO(),
            show_pos=True,
        ) as bar:
            finished = 0
            run_finished = False
            while finished < total or not run_finished:
                await asyncio.sleep(0.1)
                now_finished = pool.stats.succeeded + pool.stats.dead
                bar.update(now_finished - finished)
                finished = now_finished
                run_finished = await asyncio.to_thread(
                    demo_workflow.approve_when_waiting, ledger, run_id
                )
                if finished >= total and not await asyncio.to_thread(_all_done, ledger, ids):
                    finished = total - 1  # another ledger user's jobs were counted
    finally:
        await pool.stop()


def _all_done(ledger: Ledger, ids: list[UUID]) -> bool:
    return all(not _status(ledger, job_id).is_live for job_id in ids)


def _status(ledger: Ledger, job_id: UUID) -> JobStatus:
    state = ledger.get(job_id)
    assert state is not None
    return state.status


@click.command()
@click.option(
    "--jobs",
    "count",
    type=click.IntRange(min=1, max=100_000),
    default=200,
    show_default=True,
    help="How many jobs to enqueue.",
)
@click.option(
    "--concurrency",
    type=click.IntRange(min=1),
    default=10,
    show_default=True,
    help="Handlers running at once.",
)
@click.option("--seed", type=int, default=7, show_default=True, help="For a repeatable mix.")
@json_option
@click.pass_obj
def demo(settings: Settings, *, count: int, concurrency: int, seed: int, as_json: bool) -> None:
    """Enqueue a realistic mix of jobs and work them to completion, with a summary."""
    rng = random.Random(seed)
    with Ledger.open(settings.url, create=True, pool_size=4) as ledger:
        for spec in registry.specs():
            ledger.define(
                spec.job_type,
                max_attempts=spec.max_attempts or 8,
                backoff=spec.backoff or BackoffPolicy(),
            )
        before = ledger.store.head_position()
        started = time.perf_counter()
        ids = [e.job_id for e in ledger.enqueue_many(demo_requests(count, rng)) if e.created]
        run_id = ledger.workflows.submit(demo_workflow.request()).run_id
        if not as_json:
            click.echo(f"enqueued {len(ids)} jobs in {describe(settings.url)}", err=True)
            click.echo(f"started workflow {demo_workflow.WORKFLOW_TYPE} run {run_id}", err=True)
        asyncio.run(_work(ledger, ids, run_id, concurrency, show=not as_json))
        elapsed = time.perf_counter() - started
        summary = _summarise(ledger, ids, run_id, before, elapsed)
    if as_json:
        echo_json(asdict(summary))
        return
    click.echo(
        f"\n{summary.succeeded} succeeded, {summary.retried} retried on the way, "
        f"{summary.dead} dead — {summary.events_written} events written in "
        f"{summary.elapsed_s:.2f}s"
    )
    run = summary.workflow
    click.echo(
        f"workflow {demo_workflow.WORKFLOW_TYPE} {run.status}: {len(demo_workflow.REGIONS)} "
        f"fetches fanned in to a merge, approved by the demo, published ({run.steps} steps)"
    )
    click.echo("\nNext, try:")
    # As the user ran it: after the README's install `jobledger` is not on PATH.
    run_again = program()
    db = f" --db {shlex.quote(settings.url)}" if settings.url != "./jobledger.db" else ""
    cmd = f"{run_again}{db}"
    if summary.example_retried:
        click.echo(f"  {cmd} history {summary.example_retried}   # a job that retried")
    if summary.example_dead:
        click.echo(f"  {cmd} show {summary.example_dead}      # a dead letter")
    if summary.example_report:
        click.echo(f"  {cmd} history {summary.example_report}   # stages and heartbeats")
    click.echo(f"  {cmd} workflow show {run.run_id}       # the workflow's steps")
    click.echo(f"  {cmd} workflow timeline {run.run_id}   # run and step events")


def _summarise(
    ledger: Ledger, ids: list[UUID], run_id: UUID, before: int, elapsed: float
) -> DemoSummary:
    succeeded = dead = retried = 0
    examples: dict[str, str] = {}
    for job_id in ids:
        state = ledger.get(job_id)
        assert state is not None
        if state.status is JobStatus.SUCCEEDED:
            succeeded += 1
        elif state.status is JobStatus.DEAD:
            dead += 1
            examples.setdefault("dead", str(job_id))
        if state.retries:
            retried += 1
            if state.status is JobStatus.SUCCEEDED:
                examples.setdefault("retried", str(job_id))
        if state.job_type == "demo.report":
            examples.setdefault("report", str(job_id))
    return DemoSummary(
        jobs=len(ids),
        succeeded=succeeded,
        retried=retried,
        dead=dead,
        events_written=ledger.store.head_position() - before,
        elapsed_s=round(elapsed, 3),
        example_retried=examples.get("retried"),
        example_dead=examples.get("dead"),
        example_report=examples.get("report"),
        workflow=demo_workflow.summarise(ledger, run_id),
    )
