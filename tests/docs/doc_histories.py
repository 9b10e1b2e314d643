"""Histories the pages' examples are told against, written through the Python API.

``jobledger demo`` makes a realistic history, but its pool works jobs concurrently on the
system clock, so which job gets which position differs from run to run. The pages' audit,
timeline and replay examples need one history that is the same every time: this writes the
demo's mix (``cli.demo.demo_requests``, same job types and payloads, so ``replay --run
--app cli.demo:registry`` runs the real handlers on it) one job at a time, on a fake clock,
each job worked to its end the way the demo's handlers end it.
"""

from __future__ import annotations

import random

from jobledger_cli.demo import QUICK_RETRY, demo_requests
from ledger import Failure, FailureKind, FakeClock, Ledger
from ledger.core.state import JobState
from ledger.core.values import BackoffPolicy, EnqueueRequest

DEMO_WORKER = "default@vm:28901"
DEMO_TYPES = {
    # job type: (max attempts, backoff), as cli.demo registers them
    "demo.email": (3, BackoffPolicy()),
    "demo.flaky": (5, QUICK_RETRY),
    "demo.broken": (3, QUICK_RETRY),
    "demo.report": (3, QUICK_RETRY),
}
STAGES = ("running", "querying", "rendering", "uploading")


def demo_history(ledger: Ledger, clock: FakeClock, count: int, seed: int = 7) -> None:
    """Enqueue the demo's mix of ``count`` jobs and work each to its end, one by one."""
    for job_type, (max_attempts, backoff) in DEMO_TYPES.items():
        ledger.define(job_type, max_attempts=max_attempts, backoff=backoff)
    for request in demo_requests(count, random.Random(seed)):
        clock.advance(0.25)
        work_one(ledger, clock, request)


def work_one(ledger: Ledger, clock: FakeClock, request: EnqueueRequest) -> None:
    """Enqueue ``request`` and work it as the demo's handler for its type would."""
    ledger.enqueue_many([request])
    attempt = 0
    while True:
        clock.advance(1.0)  # past any QUICK_RETRY delay (at most 1.25 s)
        [job] = ledger.claim(DEMO_WORKER, limit=1)
        attempt += 1
        clock.advance(0.003)
        if not _finish(ledger, clock, job, attempt):
            return


def _finish(ledger: Ledger, clock: FakeClock, job: JobState, attempt: int) -> bool:
    """Record the attempt's end; True when the job was scheduled for a retry."""
    lease, payload = job.lease, job.request.payload
    assert lease is not None
    if job.request.job_type == "demo.flaky":
        if attempt <= int(str(payload["fails"])):
            message = f"upstream answered 503 (attempt {attempt})"
            failure = Failure(kind=FailureKind.RETRYABLE, code="http.503", message=message)
            ledger.fail(lease, failure)
            return True
        ledger.succeed(lease, output={"status": 200, "attempts": attempt})
    elif job.request.job_type == "demo.broken":
        message = f"invoice {payload['invoice']} has no total"
        failure = Failure(kind=FailureKind.TERMINAL, code="invoice.malformed", message=message)
        ledger.fail(lease, failure)
    elif job.request.job_type == "demo.report":
        for done, stage in enumerate(STAGES, start=1):
            checkpoint = {"step": done}
            ledger.progress(lease, stage=stage, done=done, total=len(STAGES), checkpoint=checkpoint)
            clock.advance(0.02)
            ledger.heartbeat(lease)
        clock.advance(0.01)
        ledger.succeed(lease, output={"pages": int(str(payload["pages"]))})
    else:
        ledger.succeed(lease, output={"sent_to": str(payload["to"])})
    return False
