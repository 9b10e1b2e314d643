"""The handlers the chaos suite's worker processes run, and their side log of handler starts.

Loaded by real worker processes (``jobledger worker --app chaos_app:registry`` or
``chaos_launcher.py``) with ``tests/chaos`` on ``PYTHONPATH``. Every handler start appends
one JSON line to ``$JOBLEDGER_CHAOS_LOG/starts-<pid>.jsonl`` *before* the handler does
anything: job id, run, attempt, the worker id of its lease, the lease expiry the worker knew
at claim time and the wall time of the start, on the system clock the worker stamps its
events with, so the two may be compared; a second line (``"what": "finish"``) follows when
the handler returns or raises. The suite checks that log against the history: a
start the ledger did not lease at that moment is a handler run on an expired lease.

Job types (their payload: ``ms`` of work, ``progress`` to report progress, ``flaky`` to fail
retryably on the first attempt):

- ``chaos.async``: an ``async def`` handler;
- ``chaos.sync``: a plain ``def`` handler (runs in a thread, reports with ``*_blocking``);
- ``chaos.hang``: waits until the side log directory holds a file named ``release``
  (bounded: it gives up after ``HANG_LIMIT_S`` and fails retryably), for shutdown tests.
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
import time
from pathlib import Path
from typing import Any

from ledger.clock import SystemClock
from ledger.core.values import BackoffPolicy
from ledger.runtime.handlers import JobContext, Registry, TransientError

LOG_ENV = "JOBLEDGER_CHAOS_LOG"
MAX_ATTEMPTS = 25
"""High enough that no amount of bounded chaos exhausts a job: a dead job means lost work."""
BACKOFF = BackoffPolicy(base_s=0.05, max_s=0.5, jitter=0.0)
HANG_LIMIT_S = 60.0
RELEASE_FILE = "release"
READY = "ready"
"""What a worker process prints on stderr once it serves (signal handlers installed)."""

registry = Registry()
_clock = SystemClock()
_log_lock = threading.Lock()


def log_start(ctx: JobContext) -> None:
    """Append this start to the process's side log and flush it (a SIGKILL may follow)."""
    _log(ctx, "start")


def log_finish(ctx: JobContext) -> None:
    """Append that the handler is done (returned or raised): its outcome is the pool's now."""
    _log(ctx, "finish")


def _log(ctx: JobContext, what: str) -> None:
    directory = os.environ.get(LOG_ENV)
    if not directory:
        return
    expires = ctx.job.lease_expires_at
    line = json.dumps(
        {
            "job_id": str(ctx.id),
            "run": ctx.run,
            "attempt": ctx.attempt,
            "worker_id": ctx.lease.worker_id,
            "lease_expires_at": expires.isoformat() if expires else None,
            "wall": _clock.now().isoformat(),
            "pid": os.getpid(),
            "what": what,
        }
    )
    with _log_lock, open(Path(directory) / f"starts-{os.getpid()}.jsonl", "a") as log:
        log.write(line + "\n")
        log.flush()


def _should_fail(ctx: JobContext) -> bool:
    return bool(ctx.payload.get("flaky")) and ctx.attempt == 1


def _seconds(ctx: JobContext) -> float:
    value = ctx.payload.get("ms", 0)
    return float(value) / 1000 if isinstance(value, int | float) else 0.0


@registry.handler("chaos.async", max_attempts=MAX_ATTEMPTS, backoff=BACKOFF)
async def async_work(ctx: JobContext) -> dict[str, Any]:
    """Sleep ``ms`` (in two halves around a progress report when asked), fail once if flaky."""
    log_start(ctx)
    try:
        return await _async_body(ctx)
    finally:
        log_finish(ctx)


async def _async_body(ctx: JobContext) -> dict[str, Any]:
    if ctx.payload.get("progress"):
        await ctx.progress(stage="working", done=0, total=2)
    await asyncio.sleep(_seconds(ctx) / 2)
    if ctx.payload.get("progress"):
        await ctx.progress(done=1, total=2)
    await asyncio.sleep(_seconds(ctx) / 2)
    if _should_fail(ctx):
        raise TransientError("flaky downstream, first attempt")
    return {"n": ctx.payload.get("n")}


@registry.handler("chaos.sync", max_attempts=MAX_ATTEMPTS, backoff=BACKOFF)
def sync_work(ctx: JobContext) -> dict[str, Any]:
    """:func:`async_work` as a plain function in a thread."""
    log_start(ctx)
    try:
        return _sync_body(ctx)
    finally:
        log_finish(ctx)


def _sync_body(ctx: JobContext) -> dict[str, Any]:
    if ctx.payload.get("progress"):
        ctx.progress_blocking(stage="working", done=0, total=2)
    time.sleep(_seconds(ctx) / 2)
    if ctx.payload.get("progress"):
        ctx.progress_blocking(done=1, total=2)
    time.sleep(_seconds(ctx) / 2)
    if _should_fail(ctx):
        raise TransientError("flaky downstream, first attempt")
    return {"n": ctx.payload.get("n")}


@registry.handler("chaos.hang", max_attempts=MAX_ATTEMPTS, backoff=BACKOFF)
async def hang(ctx: JobContext) -> dict[str, Any]:
    """Hold the job until the test drops the release file (shutdown tests)."""
    log_start(ctx)
    release = Path(os.environ.get(LOG_ENV, ".")) / RELEASE_FILE
    for _ in range(int(HANG_LIMIT_S * 20)):
        if release.exists():
            return {"released": True}
        await asyncio.sleep(0.05)
    raise TransientError("never released")
