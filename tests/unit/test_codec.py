"""The event codec: stable topics, msgpack round trips, upcasting old versions."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, ClassVar
from uuid import UUID, uuid4

import msgspec
import pytest

from ledger.core.codec import DEFAULT_CODEC, EventCodec, parse_topic, topic_of
from ledger.core.decide import decide_enqueue
from ledger.core.errors import UnknownEventError
from ledger.core.events import (
    ALL_EVENTS,
    Event,
    JobEnqueued,
    JobFailed,
    JobSucceeded,
    JobTypeUpdated,
)
from ledger.core.values import (
    BackoffPolicy,
    EnqueueRequest,
    Failure,
    FailureKind,
    JobDefinition,
    Subject,
    SubjectOp,
)

AT = datetime(2026, 3, 4, 5, 6, 7, 891011, tzinfo=UTC)


def test_topics_are_stable_names_with_a_version_never_class_paths() -> None:
    """Every event is stored as '<snake_case name>.v<version>'."""
    for cls in ALL_EVENTS:
        topic = topic_of(cls)
        assert "." not in cls.name and cls.name.islower()
        assert topic == f"{cls.name}.v{cls.version}"
        assert parse_topic(topic) == (cls.name, cls.version)


def test_enqueued_event_round_trips_with_uuid_datetime_and_nested_values() -> None:
    """UUIDs, aware datetimes, enums and nested structs survive encode/decode."""
    event = JobEnqueued(
        at=AT,
        job_id=uuid4(),
        request=EnqueueRequest(
            job_type="sync",
            payload={"a": [1, 2.5, None, {"b": "c"}]},
            priority=7,
            run_at=AT,
            org="acme",
            idempotency_key="k",
            subject=Subject(source_id="s3", uri="s3://b/k", op=SubjectOp.DELETE, revision="e1"),
        ),
        definition_version=2,
        priority=7,
        run_at=AT,
        max_attempts=3,
        timeout_s=12.5,
        backoff=BackoffPolicy(base_s=1.0, max_s=9.0, jitter=0.0),
        workflow=None,
    )
    topic, state = DEFAULT_CODEC.encode(event)
    decoded = DEFAULT_CODEC.decode(topic, state)
    assert decoded == event
    assert isinstance(decoded, JobEnqueued)
    assert decoded.request.subject is not None
    assert decoded.request.subject.op is SubjectOp.DELETE


def test_every_field_is_stored_defaults_included() -> None:
    """Defaults are stored too, so changing a default in code cannot rewrite old events."""
    _, state = DEFAULT_CODEC.encode(JobSucceeded(at=AT, run_number=1, attempt=1, worker_id="w"))
    assert set(msgspec.msgpack.decode(state)) == {
        "at",
        "run_number",
        "attempt",
        "worker_id",
        "output",
        "revision",
        "content_hash",
    }


def test_old_versions_are_upcast_before_decoding() -> None:
    """A v1 state is passed through the registered upcaster to the current v2 class."""

    class Renamed(Event):
        name: ClassVar[str] = "thing_happened"
        version: ClassVar[int] = 2
        new_field: str

    codec = EventCodec([Renamed])

    def v1_to_v2(fields: dict[str, Any]) -> dict[str, Any]:
        fields["new_field"] = fields.pop("old_field").upper()
        return fields

    codec.register_upcaster("thing_happened", 1, v1_to_v2)
    old_state = msgspec.msgpack.encode({"at": AT, "old_field": "abc"})
    decoded = codec.decode("thing_happened.v1", old_state)
    assert decoded == Renamed(at=AT, new_field="ABC")


def test_unknown_and_newer_events_are_refused_with_a_clear_error() -> None:
    """A topic this code does not know, or from a future version, raises UnknownEventError."""
    with pytest.raises(UnknownEventError, match="unknown event"):
        DEFAULT_CODEC.decode("job_exploded.v1", b"\x80")
    with pytest.raises(UnknownEventError, match="newer"):
        DEFAULT_CODEC.decode("job_failed.v9", b"\x80")
    with pytest.raises(UnknownEventError, match="no upcaster"):
        EventCodec([JobFailed]).decode("job_failed.v0", msgspec.msgpack.encode({"at": AT}))


def test_failure_kinds_classify_retryable_ones() -> None:
    """retryable, timeout, lease_expired and worker_lost are retryable; terminal and panicked
    are not."""
    retryable = {k for k in FailureKind if k.is_retryable}
    assert retryable == {
        FailureKind.RETRYABLE,
        FailureKind.TIMEOUT,
        FailureKind.LEASE_EXPIRED,
        FailureKind.WORKER_LOST,
    }
    event = JobFailed(
        at=AT,
        run_number=1,
        attempt=1,
        worker_id="w",
        failure=Failure(kind=FailureKind.PANICKED, code="job.handler_panic", message="x"),
    )
    assert DEFAULT_CODEC.decode(*DEFAULT_CODEC.encode(event)) == event


def test_definitions_round_trip() -> None:
    """Job-type definition events keep every field."""
    from ledger.core.events import JobTypeDefined

    event = JobTypeDefined(at=AT, definition=JobDefinition(job_type="t", enabled=False))
    assert DEFAULT_CODEC.decode(*DEFAULT_CODEC.encode(event)) == event


def test_a_v1_job_enqueued_reads_as_v2_with_no_workflow_link() -> None:
    """Jobs enqueued before workflows existed run no step: ``workflow`` is ``None``."""
    at = datetime(2026, 1, 1, tzinfo=UTC)
    event = JobEnqueued(
        at=at,
        job_id=uuid4(),
        request=EnqueueRequest(job_type="email", payload={}),
        definition_version=1,
        priority=100,
        run_at=at,
        max_attempts=3,
        timeout_s=60.0,
        backoff=BackoffPolicy(),
        workflow=None,
    )
    fields = msgspec.msgpack.decode(DEFAULT_CODEC.encode(event)[1])
    del fields["workflow"]
    decoded = DEFAULT_CODEC.decode("job_enqueued.v1", msgspec.msgpack.encode(fields))
    assert decoded == event and decoded.workflow is None  # type: ignore[attr-defined]


def test_an_enqueue_or_type_update_without_an_actor_stores_no_actor_key() -> None:
    """``actor`` is the one field left out when unset, so an event without one is stored as
    before the field existed (``workflow: nil`` stays); with one, it round-trips."""
    request, definition = EnqueueRequest(job_type="t"), JobDefinition(job_type="t")
    plain = decide_enqueue(UUID(int=3), request, definition, AT)
    fields = msgspec.msgpack.decode(DEFAULT_CODEC.encode(plain)[1])
    assert "actor" not in fields and fields["workflow"] is None
    named = msgspec.structs.replace(plain, actor="api token x")
    topic, state = DEFAULT_CODEC.encode(named)
    assert topic == "job_enqueued.v2"
    assert DEFAULT_CODEC.decode(topic, state) == named
    updated = JobTypeUpdated(at=AT, definition=JobDefinition(job_type="t"))
    assert set(msgspec.msgpack.decode(DEFAULT_CODEC.encode(updated)[1])) == {"at", "definition"}
    by = msgspec.structs.replace(updated, actor="api token y")
    assert DEFAULT_CODEC.decode(*DEFAULT_CODEC.encode(by)) == by
