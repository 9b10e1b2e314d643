"""jobledger, measured for ``bench/compare.py`` (see ``harness`` for the protocol).

Beyond the figures every system gets, jobledger also reports the cross-process wake-up
latency: with the pool idle, another process
  (``jobledger_wakeup_child.py``) enqueues one job at a time; the latency is the time from that
  enqueue's commit to the handler's start, p50/p95 over ``--wakeup-samples`` jobs. Both ends
  use ``time.time()``: ``perf_counter`` is not comparable across processes.

Settings: bulk enqueue with ``Ledger.enqueue_many`` in chunks of 5,000 (one transaction each);
``WorkerPool(concurrency=C, prefetch=P)`` (``--settings``), its defaults otherwise: the pool
leases at most C + P jobs (C running, P claimed and waiting for a slot), so C + P is the
declared claim depth; the ledger's pool of 4 connections.
"""

from __future__ import annotations

import asyncio
import random
import sys
import time
from importlib.metadata import version
from pathlib import Path
from typing import Any

import harness
import probe

from ledger import EnqueueRequest, Ledger
from ledger.runtime.pool import JobContext, Registry, WorkerPool

SYSTEM = "jobledger"
JOB_TYPE = "bench.noop"
ENQUEUE_CHUNK = 5000
LEDGER_POOL = 4
# A job's own events (job_enqueued, job_leased, job_succeeded…), not the job *type*'s: each
# records one past transition; the job's current state is its jl_queue row.
JOB_EVENTS_SQL = (
    "SELECT count(*) FROM jl_events WHERE topic LIKE 'job\\_%' AND topic NOT LIKE 'job\\_type\\_%'"
)
STATE_ROWS_SQL = "SELECT count(*) FROM jl_queue"
# Each row's xmin names the transaction that wrote it. Worker-path appends take no table lock
# any more, so notification ids are only close to commit order: "leased at once", replayed in
# id order, is approximate (within the few transactions in flight together).
DEPTH_SQL = probe.DepthSql(
    claims="SELECT count(*) FROM jl_events WHERE topic LIKE 'job\\_leased%' GROUP BY xmin",
    flushes="SELECT count(*) FROM jl_events WHERE topic LIKE 'job\\_succeeded%' GROUP BY xmin",
    leases="""
        SELECT notification_id, CASE WHEN topic LIKE 'job\\_leased%' THEN 1 ELSE -1 END
        FROM jl_events
        WHERE topic LIKE 'job\\_leased%' OR topic LIKE 'job\\_succeeded%'
        ORDER BY notification_id
    """,
)
CHILD = Path(__file__).resolve().parent / "jobledger_wakeup_child.py"
# Idle time before each wake-up sample, drawn at random so that samples do not phase-lock
# with the pool's poll interval (the fallback behind LISTEN/NOTIFY).
IDLE_S = (0.05, 0.25)
WAKEUP_TIMEOUT_S = 10.0


class Handler:
    """The no-op handler: counts bulk jobs, timestamps wake-up jobs as they start."""

    def __init__(self) -> None:
        self.tally = harness.Tally()
        self.started: dict[int, float] = {}
        self.started_event = asyncio.Event()

    async def __call__(self, ctx: JobContext) -> None:
        sample = ctx.payload.get("wake")
        if sample is None:
            self.tally.hit()
            return
        self.started[int(sample)] = time.time()  # noqa: TID251 - compared across processes
        self.started_event.set()


def enqueue(ledger: Ledger, n: int) -> float:
    start = harness.timed()
    for first in range(0, n, ENQUEUE_CHUNK):
        ledger.enqueue_many(
            [
                EnqueueRequest(job_type=JOB_TYPE, payload=harness.payload(i))
                for i in range(first, min(first + ENQUEUE_CHUNK, n))
            ]
        )
    return harness.timed() - start


async def succeeded(ledger: Ledger) -> int:
    counts = await asyncio.to_thread(ledger.counts)
    return int(counts.get("succeeded", 0))


async def wait_started(handler: Handler, sample: int) -> float:
    async def started() -> float:
        while sample not in handler.started:
            handler.started_event.clear()
            await handler.started_event.wait()
        return handler.started[sample]

    return await asyncio.wait_for(started(), WAKEUP_TIMEOUT_S)


async def wakeup_latencies(url: str, handler: Handler, samples: int) -> list[float]:
    """Milliseconds from the other process's enqueue commit to the handler's start."""
    child = await asyncio.create_subprocess_exec(
        sys.executable,
        str(CHILD),
        "--url",
        url,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
    )
    assert child.stdin is not None and child.stdout is not None
    try:
        if (await child.stdout.readline()).strip() != b"ready":
            raise RuntimeError("the wake-up child did not start")
        latencies = []
        for sample in range(samples):
            await asyncio.sleep(random.uniform(*IDLE_S))
            child.stdin.write(f"{sample}\n".encode())
            await child.stdin.drain()
            started = await wait_started(handler, sample)
            answer = (await child.stdout.readline()).split()
            committed = float(answer[1])
            latencies.append((started - committed) * 1000)
        return latencies
    finally:
        child.stdin.close()
        await child.wait()


async def run(args: harness.AdapterArgs) -> harness.Measurement:
    concurrency, prefetch = int(args.settings["concurrency"]), int(args.settings["prefetch"])
    ledger = Ledger.open(args.url, create=True, pool_size=LEDGER_POOL)
    figures = probe.Probe.open(args.url)
    try:
        ledger.define(JOB_TYPE)
        figures.before_enqueue()
        enqueue_s = enqueue(ledger, args.n)
        figures.after_enqueue()
        harness.analyze(args.url)

        handler = Handler()
        registry = Registry()
        registry.handler(JOB_TYPE)(handler)
        pool = WorkerPool(ledger, registry, concurrency=concurrency, prefetch=prefetch)
        figures.before_process()
        start = harness.timed()
        await pool.start()
        try:
            await harness.drain(handler.tally, args.n, lambda: succeeded(ledger))
            process_s = harness.timed() - start
            figures.after_process()
            # Counted right after the drain: every bulk job's whole history, nothing else yet.
            history_rows = harness.scalar(args.url, JOB_EVENTS_SQL)
            state_rows = harness.scalar(args.url, STATE_ROWS_SQL)
            depth = probe.depth(args.url, DEPTH_SQL)
            latencies = await wakeup_latencies(args.url, handler, args.wakeup_samples)
        finally:
            await pool.stop()
        counts = ledger.counts()
    finally:
        ledger.close()

    total = args.n + args.wakeup_samples
    done = counts.get("succeeded", 0)
    harness.verify(SYSTEM, total, done, sum(counts.values()) - done)
    return harness.Measurement(
        system=SYSTEM,
        version=version("jobledger"),
        n=args.n,
        enqueue_s=enqueue_s,
        process_s=process_s,
        steady_s=handler.tally.steady_s(args.n),
        finished=done - args.wakeup_samples,
        handled=handler.tally.value,
        history_rows=history_rows,
        state_rows=state_rows,
        probe=figures.as_json(),
        depth=depth,
        settings={
            "enqueue": f"Ledger.enqueue_many, chunks of {ENQUEUE_CHUNK}",
            "worker": f"WorkerPool(concurrency={concurrency}, prefetch={prefetch}), defaults",
            "pool": LEDGER_POOL,
        },
        extra=extra_figures(latencies),
    )


def extra_figures(latencies: list[float]) -> dict[str, Any]:
    if not latencies:
        return {}
    return {
        "wakeup_samples": len(latencies),
        "wakeup_p50_ms": harness.percentile(latencies, 50),
        "wakeup_p95_ms": harness.percentile(latencies, 95),
    }


if __name__ == "__main__":
    harness.emit(asyncio.run(run(harness.parse_args())))
