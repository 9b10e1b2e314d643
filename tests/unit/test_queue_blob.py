"""The queue view's rows: packed state blobs decode to what was encoded, map-form blobs (view
version 1) still decode, and an update row is the full row's changeable part."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from uuid import uuid4

import msgspec
from msgspec.structs import replace

from ledger.core.state import JobState
from ledger.core.values import (
    BackoffPolicy,
    EnqueueRequest,
    Failure,
    FailureKind,
    JobStatus,
    Subject,
    SubjectOp,
    WorkflowLink,
)
from ledger.views.queue import decode_state, encode_state, queue_row, queue_update_row

AT = datetime(2026, 1, 2, 3, 4, 5, 678901, tzinfo=UTC)


def small_job() -> JobState:
    request = EnqueueRequest(job_type="bench", payload={"i": 1})
    return JobState(
        job_id=uuid4(),
        request=request,
        definition_version=1,
        priority=100,
        max_attempts=8,
        timeout_s=900.0,
        backoff=BackoffPolicy(),
        enqueued_at=AT,
        run_at=AT,
        updated_at=AT,
        version=1,
    )


def full_job() -> JobState:
    """Every optional field set, nested values included."""
    request = EnqueueRequest(
        job_type="sync",
        payload={"nested": {"list": [1, 2.5, None, "x"]}},
        priority=7,
        run_at=AT,
        delay_s=1.5,
        max_attempts=3,
        timeout_s=12.0,
        org="acme",
        queue="bulk",
        idempotency_key="k",
        subject=Subject(source_id="src", uri="a/b", op=SubjectOp.DELETE, revision="r0"),
    )
    later = AT + timedelta(seconds=3)
    return replace(
        small_job(),
        request=request,
        status=JobStatus.DEAD,
        stage="parsing",
        run_number=2,
        attempt=3,
        worker_id="host:1",
        lease_expires_at=later,
        last_heartbeat_at=later,
        started_at=later,
        progress_done=4,
        progress_total=9,
        checkpoint={"page": 3},
        last_error=Failure(kind=FailureKind.TERMINAL, code="bad", message="m"),
        retries=2,
        output={"n": 1},
        result_revision="r1",
        result_content_hash="h1",
        finished_at=later,
        reason="gave up",
        workflow=WorkflowLink(run_id=uuid4(), step_key="load"),
    )


def test_packed_blobs_decode_to_the_state_encoded() -> None:
    """A small job and one with every field set come back equal, of the same types."""
    for state in (small_job(), full_job()):
        decoded = decode_state(encode_state(state))
        assert decoded == state
        assert type(decoded) is JobState
        assert type(decoded.request) is EnqueueRequest


def test_map_form_blobs_of_view_version_1_still_decode() -> None:
    """Rows written before the packed form (and old dead letters' snapshots) stay readable."""
    for state in (small_job(), full_job()):
        assert decode_state(msgspec.msgpack.encode(state)) == state


def test_packed_blobs_written_before_the_workflow_link_decode_with_none() -> None:
    """A row packed before ``JobState.workflow`` existed (one field fewer) reads as a job
    that runs no step: the field is last, with a default, so the queue needs no rebuild."""
    state = full_job()
    blob = encode_state(state)
    values = msgspec.msgpack.decode(blob)
    old = msgspec.msgpack.encode(values[:-1])
    assert decode_state(old) == replace(state, workflow=None)


def test_a_small_jobs_blob_is_under_a_third_of_the_map_form() -> None:
    """The lever itself: no field names stored (630 bytes in the map form, 188 packed)."""
    state = small_job()
    assert len(encode_state(state)) * 3 < len(msgspec.msgpack.encode(state))


FIXED_AT_ENQUEUE = {"job_type", "queue", "org", "idempotency_key", "source_id", "uri"}


def test_an_update_row_is_the_full_row_without_what_enqueue_fixed() -> None:
    """Every column but the request's and ``enqueue_seq``, with the full row's values."""
    leased = replace(small_job(), status=JobStatus.LEASED, worker_id="w", lease_expires_at=AT)
    for state in (small_job(), leased, full_job()):
        key = uuid4()
        full = queue_row(state, 7, key)
        assert queue_update_row(state, key) == {
            name: value
            for name, value in full.items()
            if name not in FIXED_AT_ENQUEUE and name != "enqueue_seq"
        }
