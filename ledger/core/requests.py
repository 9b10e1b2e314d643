"""What callers ask, validated and normalised: enqueue requests, job definitions, names,
outputs and reasons, a request's canonical form and whether two requests are the same.

Apart from the transitions (:mod:`ledger.core.decide`) because a request is checked before any
state is read: the enqueue path normalises a batch, and ``replay --check`` re-normalises a
recorded request, without deciding anything. Pure: no store, driver or clock. Every refusal is
an :class:`~ledger.core.errors.InvalidRequestError`.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TypeVar

import msgspec

from ledger.core.errors import InvalidRequestError
from ledger.core.limits import (
    MAX_JSON_BYTES,
    MAX_NAME_LENGTH,
    bounded_message,
    check_code,
    check_json,
    check_name,
    check_reason,
    check_seconds,
    check_subject_text,
    encode_json,
    flat_plain,
)
from ledger.core.rates import check_rate
from ledger.core.values import (
    JSON,
    EnqueueRequest,
    Failure,
    JobDefinition,
    RateLimit,
    Subject,
    SubjectOp,
)

MAX_PAYLOAD_BYTES = MAX_JSON_BYTES
"""The largest payload (as JSON) an enqueue accepts; larger data belongs in a blob store."""

INT32 = 2**31

__all__ = [
    "INT32",
    "MAX_NAME_LENGTH",
    "MAX_PAYLOAD_BYTES",
    "aware",
    "canonical",
    "check_failure",
    "check_name",
    "check_output",
    "check_reason",
    "normalise_request",
    "same_request",
    "typed",
    "validate_definition",
]

T = TypeVar("T")


# --- requests and definitions ---------------------------------------------------------------


def aware(value: datetime, what: str) -> datetime:
    """Refuse a naive time, and one whose UTC time is outside the years 1 to 9999 (which
    ``datetime`` cannot hold: ``0001-01-01T00:00+01:00`` is in the year 0); returns the
    time in UTC."""
    if value.tzinfo is None or value.utcoffset() is None:
        raise InvalidRequestError(f"{what} must carry a time zone")
    try:
        return value.astimezone(UTC)
    except OverflowError:
        raise InvalidRequestError(
            f"{what} {value.isoformat()} is outside the years 1 to 9999 in UTC"
        ) from None


def typed(value: T, cls: type[T], what: str) -> T:
    """Check every field's type. msgspec checks types when it decodes, not when Python code
    builds a struct, and a wrongly typed value that got stored could never be read back."""
    try:
        return msgspec.convert(msgspec.to_builtins(value, builtin_types=(datetime,)), cls)
    except msgspec.ValidationError as exc:
        raise InvalidRequestError(f"{what}: {exc}") from None


def canonical(request: EnqueueRequest) -> bytes:
    """A request's canonical JSON (object keys sorted): equal bytes, same request."""
    return msgspec.json.encode(msgspec.to_builtins(request), order="sorted")


def validate_definition(definition: JobDefinition) -> JobDefinition:
    """Reject a definition no job could run under; returns it type-checked."""
    definition = typed(definition, JobDefinition, "job definition")
    check_name(definition.job_type, "job_type")
    if definition.version < 1:
        raise InvalidRequestError("version must be >= 1")
    if definition.max_attempts < 1:
        raise InvalidRequestError("max_attempts must be >= 1")
    if not definition.version < INT32 or not definition.max_attempts < INT32:
        raise InvalidRequestError("version and max_attempts must fit in 32 bits")
    check_seconds(definition.default_timeout_s, "default_timeout_s")
    if not -INT32 <= definition.default_priority < INT32:
        raise InvalidRequestError("default_priority must fit in 32 bits")
    backoff = definition.backoff
    check_seconds(backoff.base_s, "backoff base_s", zero=True)
    check_seconds(backoff.max_s, "backoff max_s", zero=True)
    if backoff.max_s < backoff.base_s or not 0 <= backoff.jitter < 1:
        raise InvalidRequestError("backoff needs 0 <= base_s <= max_s and 0 <= jitter < 1")
    _check_limits(definition)
    if isinstance(definition.rate, RateLimit):
        check_rate(definition.rate)
    return definition


def _check_limits(definition: JobDefinition) -> None:
    """A concurrency limit is a positive 32-bit count; a resource limit needs its resource."""
    for name in ("concurrency", "per_org_concurrency", "resource_limit"):
        value = getattr(definition, name)
        if value is not msgspec.UNSET and not 1 <= value < INT32:
            raise InvalidRequestError(f"{name} must be >= 1 and fit in 32 bits")
    if definition.resource is not msgspec.UNSET:
        check_name(definition.resource, "resource")
        if definition.resource_limit is msgspec.UNSET:
            raise InvalidRequestError("a resource needs its resource_limit")
    elif definition.resource_limit is not msgspec.UNSET:
        raise InvalidRequestError("resource_limit needs a resource")


def normalise_request(request: EnqueueRequest) -> EnqueueRequest:
    """Validate an enqueue request; returns it with every field type-checked, its payload
    as plain JSON values (a tuple becomes a list) and its times in UTC.

    Raises InvalidRequestError; nothing that passes can fail to decode later."""
    if not isinstance(request.payload, dict):
        raise InvalidRequestError("payload must be a JSON object")
    if _exactly_typed(request) and flat_plain(request.payload):
        # What most requests are: the general path's JSON round trip and type check would
        # return an equal request (same keys in the same order, same values of the same
        # types), at several times the cost; so only the bounds are left to check.
        encode_json(request.payload, "payload", max_bytes=MAX_PAYLOAD_BYTES)
        request = msgspec.structs.replace(request, payload=dict(request.payload))
    else:
        encoded = check_json(request.payload, "payload", max_bytes=MAX_PAYLOAD_BYTES)
        request = typed(
            msgspec.structs.replace(request, payload=msgspec.json.decode(encoded)),
            EnqueueRequest,
            "enqueue request",
        )
    check_name(request.job_type, "job_type")
    if request.priority is not None and not -INT32 <= request.priority < INT32:
        raise InvalidRequestError("priority must fit in 32 bits")
    if request.max_attempts is not None and not 1 <= request.max_attempts < INT32:
        raise InvalidRequestError("max_attempts must be >= 1 and fit in 32 bits")
    if request.timeout_s is not None:
        check_seconds(request.timeout_s, "timeout_s")
    if request.delay_s is not None:
        check_seconds(request.delay_s, "delay_s", zero=True)
    if request.run_at is not None and request.delay_s is not None:
        raise InvalidRequestError("give run_at or delay_s, not both")
    check_name(request.org, "org", optional=True)
    check_name(request.queue, "queue", optional=True)
    check_name(request.idempotency_key, "idempotency_key", optional=True)
    if request.subject is not None:
        check_name(request.subject.source_id, "subject.source_id")
        if not isinstance(request.subject.uri, str) or not request.subject.uri:
            raise InvalidRequestError("subject.uri must be a non-empty string")
        check_subject_text(request.subject.uri, "subject.uri")
        if request.subject.revision is not None:
            check_subject_text(request.subject.revision, "subject.revision")
    if request.run_at is not None:
        return msgspec.structs.replace(request, run_at=aware(request.run_at, "run_at"))
    return request


def _exactly_typed(request: EnqueueRequest) -> bool:
    """Whether every field of ``request`` already holds exactly the type the type check
    would leave there (not a subclass, not an int where a float goes: the check would
    convert those), so that the check cannot change or refuse it."""
    if type(request) is not EnqueueRequest or type(request.job_type) is not str:
        return False
    if (
        request.priority is None
        and request.max_attempts is None
        and request.delay_s is None
        and request.timeout_s is None
        and request.org is None
        and request.queue is None
        and request.idempotency_key is None
        and request.run_at is None
        and request.subject is None
    ):
        return True  # the usual request (checked first: the loop below costs a microsecond)
    for value, kind in (
        (request.priority, int),
        (request.max_attempts, int),
        (request.delay_s, float),
        (request.timeout_s, float),
        (request.org, str),
        (request.queue, str),
        (request.idempotency_key, str),
        (request.run_at, datetime),
    ):
        if value is not None and type(value) is not kind:
            return False
    subject = request.subject
    return subject is None or (
        type(subject) is Subject
        and type(subject.source_id) is str
        and type(subject.uri) is str
        and type(subject.op) is SubjectOp
        and (subject.revision is None or type(subject.revision) is str)
    )


def same_request(existing: EnqueueRequest, request: EnqueueRequest) -> bool:
    """Whether ``request`` repeats ``existing`` field for field, as requested (not as
    resolved), compared canonically: key order does not matter, ``1`` is not ``1.0``."""
    return canonical(existing) == canonical(request)


# --- what workers and operators send --------------------------------------------------------


def check_output(output: JSON | None, what: str = "output") -> None:
    """Refuse a value that could not be stored or read back: not JSON, nested deeper than
    ``MAX_JSON_DEPTH``, over ``MAX_JSON_BYTES`` (see :mod:`ledger.core.limits`)."""
    check_json(output, what)


def check_failure(failure: Failure) -> Failure:
    """``failure`` type-checked, its code checked (:func:`ledger.core.limits.check_code`),
    its message normalised (:func:`ledger.core.limits.bounded_message`)."""
    failure = typed(failure, Failure, "failure")
    check_code(failure.code)
    message = bounded_message(failure.message)
    if message == failure.message:
        return failure
    return Failure(kind=failure.kind, code=failure.code, message=message)
