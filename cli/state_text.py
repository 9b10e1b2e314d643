"""A job's state as ``label  value`` lines: ``show`` prints them, and so does state replay
(``replay JOB --to-event N``), so that a past state reads like a present one."""

from __future__ import annotations

from .render import MISSING, PAYLOAD_PREVIEW, compact_json, seconds, when
from ledger.core.state import JobState
from ledger.core.values import Subject


def _error_text(state: JobState) -> str:
    error = state.last_error
    return MISSING if error is None else f"{error.kind}: {error.code}: {error.message}"


def _progress_text(state: JobState) -> str:
    done, total = state.progress_done, state.progress_total
    if done is None and total is None:
        return MISSING
    return f"{MISSING if done is None else done}/{MISSING if total is None else total}"


def _subject_text(subject: Subject) -> str:
    revision = subject.revision or MISSING
    return f"source {subject.source_id} uri {subject.uri} op {subject.op} revision {revision}"


def _optional_lines(state: JobState) -> list[tuple[str, str]]:
    """Lines ``show`` prints only when the job has the value."""
    subject = state.subject
    candidates = [
        ("org", state.org),
        ("queue", state.queue),
        ("idempotency key", state.idempotency_key),
        ("subject", None if subject is None else _subject_text(subject)),
        (
            "checkpoint",
            None if state.checkpoint is None else compact_json(state.checkpoint, PAYLOAD_PREVIEW),
        ),
        ("output", None if state.output is None else compact_json(state.output, PAYLOAD_PREVIEW)),
        ("result revision", state.result_revision),
        ("reason", state.reason),
        ("finished", None if state.finished_at is None else when(state.finished_at)),
    ]
    return [(label, value) for label, value in candidates if value is not None]


def state_lines(state: JobState) -> list[tuple[str, str]]:
    """Every field of the state a reader looks for, in reading order; optional ones only when
    the job has them."""
    return [
        ("job", str(state.job_id)),
        ("type", f"{state.job_type} (definition version {state.definition_version})"),
        ("status", f"{state.status} (stage {state.stage})"),
        ("run", str(state.run_number)),
        # The attempt in progress if leased, else the number of attempts made in this run.
        ("attempts", f"{state.attempt} of {state.max_attempts}"),
        ("worker", state.worker_id or MISSING),
        ("lease expires", when(state.lease_expires_at)),
        ("run at", when(state.run_at)),
        ("priority", str(state.priority)),
        ("timeout", seconds(state.timeout_s)),
        ("progress", _progress_text(state)),
        ("last error", _error_text(state)),
        ("retries", str(state.retries)),
        ("payload", compact_json(state.payload, PAYLOAD_PREVIEW)),
        *_optional_lines(state),
        ("enqueued", when(state.enqueued_at)),
        ("updated", f"{when(state.updated_at)} (event {state.version})"),
    ]
