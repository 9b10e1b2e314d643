"""``jobledger replay JOB --run``: the job's handler run once, locally, on its recorded
payload — nothing is written to the ledger (heartbeats and progress print to stderr)."""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import time
import traceback
from collections.abc import Callable
from types import TracebackType
from typing import Any
from uuid import UUID

import click
import msgspec

from .job_history import job_records
from .render import MISSING, compact_json, echo_json, fields
from .worker import load_registry
from ledger.api.reader import Reader
from ledger.api.shaping import plain
from ledger.core.diagnostics import current_state
from ledger.core.state import JobState, Lease
from ledger.core.values import JSON, Failure, JobStatus, Stage, WorkflowLink
from ledger.runtime import executor
from ledger.runtime.executor import Verdict
from ledger.runtime.handlers import HandlerSpec, Result
from ledger.workflows.prerequisites import prerequisite_outputs

Tag = Callable[[dict[str, Any]], dict[str, Any]]
"""What the printed JSON object gets added (the replica's lag, when read from one)."""

REPLAY_WORKER = "replay-local"
"""The worker id a re-executed job's context reports (no lease exists in the ledger)."""


async def _report(kind: str, values: dict[str, Any]) -> None:
    given = {key: value for key, value in values.items() if value is not None}
    detail = " ".join(f"{key}={compact_json(value)}" for key, value in given.items())
    click.echo(f"[replay] {kind} {detail}".rstrip() + " (not recorded)", err=True)


async def _execute(reader: Reader, spec: HandlerSpec, job: JobState, lease: Lease) -> Verdict:
    async def read_prerequisites(link: WorkflowLink) -> dict[str, JSON]:
        # A read, as in a worker: a step's handler sees what its prerequisites recorded.
        return await asyncio.to_thread(prerequisite_outputs, reader.store, link)

    context = executor.context_for(spec, job, lease, _report, read_prerequisites=read_prerequisites)
    # The job's own timeout and the worker's own judgement of what the handler did.
    return await executor.run_handler(spec, context, job.timeout_s)


def _replay_job(state: JobState, attempt: int | None, checkpoint: bool) -> tuple[JobState, Lease]:
    """The job as a worker would see it, leased to no one in the ledger."""
    number = attempt if attempt is not None else max(state.attempt, 1)
    job = msgspec.structs.replace(
        state,
        status=JobStatus.LEASED,
        stage=Stage.CLAIMED,
        attempt=number,
        worker_id=REPLAY_WORKER,
        checkpoint=state.checkpoint if checkpoint else None,
    )
    return job, Lease(state.job_id, state.run_number, number, REPLAY_WORKER)


def _would(job: JobState, retryable: bool) -> str:
    if retryable and job.attempt < job.max_attempts:
        return "retry"
    return "dead_letter"


def run_handler(
    reader: Reader,
    job: UUID,
    *,
    app: str,
    attempt: int | None,
    checkpoint: bool,
    as_json: bool,
    tagged: Tag,
) -> bool:
    """Run the handler once; print what it returned or raised. Returns whether it returned."""
    registry = load_registry(app)
    state = current_state(job_records(reader, job))
    assert state is not None
    spec = registry.get(state.job_type)
    if spec is None:
        raise click.BadParameter(
            f"{app!r} registers no handler for job type {state.job_type!r}", param_hint="--app"
        )
    replayed, lease = _replay_job(state, attempt, checkpoint)
    started = time.perf_counter()
    # Ctrl-C and friends propagate unjudged: they stop the replay, as they stop a worker.
    verdict = asyncio.run(_execute(reader, spec, replayed, lease))
    elapsed = time.perf_counter() - started
    if verdict.failure is not None and verdict.raised is not None:
        _print_raised(replayed, verdict.raised, verdict.failure, elapsed, as_json, tagged=tagged)
        return False
    if verdict.failure is not None:
        _print_invalid_output(verdict.failure, elapsed, as_json, tagged=tagged)
        return False
    assert verdict.result is not None
    _print_returned(verdict.result, elapsed, as_json, tagged=tagged)
    return True


_MACHINERY = (
    __file__,
    executor.__file__,
    os.path.dirname(asyncio.__file__),
    os.path.dirname(concurrent.futures.__file__),
)


def _handler_frames(exc: BaseException) -> TracebackType | None:
    """The traceback from the handler's first frame on: the replay's own and asyncio's
    frames before it say nothing about the failure."""
    frames = exc.__traceback__
    while frames is not None and frames.tb_next is not None:
        if not frames.tb_frame.f_code.co_filename.startswith(_MACHINERY):
            break
        frames = frames.tb_next
    return frames


def _print_returned(result: Result, elapsed: float, as_json: bool, *, tagged: Tag) -> None:
    if as_json:
        echo_json(
            tagged(
                {
                    "outcome": "returned",
                    "seconds": round(elapsed, 6),
                    "output": plain(result.output),
                    "revision": result.revision,
                    "content_hash": result.content_hash,
                }
            )
        )
        return
    lines = [("returned", f"after {elapsed:.3f}s (a worker would record job_succeeded)")]
    lines.append(("output", compact_json(result.output)))
    if result.revision is not None or result.content_hash is not None:
        lines.append(("revision", result.revision or MISSING))
        lines.append(("content hash", result.content_hash or MISSING))
    click.echo(fields(lines))


def _print_raised(
    job: JobState,
    exc: BaseException,
    failure: Failure,
    elapsed: float,
    as_json: bool,
    *,
    tagged: Tag,
) -> None:
    trace = "".join(traceback.format_exception(type(exc), exc, _handler_frames(exc)))
    retryable = failure.kind.is_retryable
    would = _would(job, retryable)
    if as_json:
        echo_json(
            tagged(
                {
                    "outcome": "raised",
                    "seconds": round(elapsed, 6),
                    "exception": type(exc).__name__,
                    "message": str(exc),
                    "failure": plain(failure),
                    "permanent": not retryable,
                    "would": would,
                    "attempt": job.attempt,
                    "max_attempts": job.max_attempts,
                    "traceback": trace,
                }
            )
        )
        return
    kind = "transient" if retryable else "permanent"
    click.echo(
        fields(
            [
                ("raised", f"after {elapsed:.3f}s: {type(exc).__name__}: {exc}"),
                ("classified", f"{kind} (kind {failure.kind}, code {failure.code})"),
                (
                    "a worker would",
                    f"{would.replace('_', ' ')} (attempt {job.attempt} of {job.max_attempts})",
                ),
            ]
        )
    )
    click.echo(trace.rstrip(), err=True)


def _print_invalid_output(failure: Failure, elapsed: float, as_json: bool, *, tagged: Tag) -> None:
    if as_json:
        echo_json(
            tagged(
                {
                    "outcome": "invalid_output",
                    "seconds": round(elapsed, 6),
                    "failure": plain(failure),
                    "permanent": True,
                    "would": "dead_letter",
                }
            )
        )
        return
    click.echo(
        fields(
            [
                ("returned", f"after {elapsed:.3f}s, but not JSON: {failure.message}"),
                ("classified", f"permanent (kind terminal, code {failure.code})"),
                ("a worker would", "dead letter"),
            ]
        )
    )


# --- the command ----------------------------------------------------------------------------
