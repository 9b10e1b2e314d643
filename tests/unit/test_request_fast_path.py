"""normalise_request's fast path for exactly typed, flat requests (ledger/core/requests.py):
the same request, the same stored bytes and the same refusals as the general path."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from typing import Any
from uuid import UUID

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.core.codec import DEFAULT_CODEC
from ledger.core.decide import decide_enqueue
from ledger.core.errors import InvalidRequestError
from ledger.core.limits import check_json
from ledger.core.requests import MAX_PAYLOAD_BYTES, aware, normalise_request, typed
from ledger.core.values import EnqueueRequest, JobDefinition, Subject, SubjectOp

NOW = datetime(2026, 1, 1, tzinfo=UTC)
DEFINITION = JobDefinition(job_type="t")
PLUS_TWO = timezone(timedelta(hours=2))


def general_path(request: EnqueueRequest) -> EnqueueRequest:
    """The general path alone (what normalise_request did for every request before)."""
    encoded = check_json(request.payload, "payload", max_bytes=MAX_PAYLOAD_BYTES)
    checked = typed(
        msgspec.structs.replace(request, payload=msgspec.json.decode(encoded)),
        EnqueueRequest,
        "enqueue request",
    )
    if checked.run_at is not None:
        return msgspec.structs.replace(checked, run_at=aware(checked.run_at, "run_at"))
    return checked


def stored(request: EnqueueRequest) -> bytes:
    """The bytes the job_enqueued event of ``request`` is stored as."""
    event = decide_enqueue(UUID(int=7), request, DEFINITION, NOW)
    return DEFAULT_CODEC.encode(event)[1]


def assert_same(request: EnqueueRequest) -> None:
    fast, general = normalise_request(request), general_path(request)
    assert fast == general
    assert list(fast.payload) == list(general.payload)  # key order too
    assert [type(v) for v in fast.payload.values()] == [type(v) for v in general.payload.values()]
    assert stored(fast) == stored(general)


scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text().filter(lambda s: "\x00" not in s)
)


@settings(max_examples=300, deadline=None)
@given(payload=st.dictionaries(st.text().filter(lambda s: "\x00" not in s), scalars))
def test_flat_payloads_normalise_as_the_general_path(payload: dict[str, Any]) -> None:
    """Any flat plain payload normalises to the request (and stored bytes) the general path
    gives."""
    assert_same(EnqueueRequest("t", payload))


@pytest.mark.parametrize(
    "request_",
    [
        EnqueueRequest("t", {"i": 1}),
        EnqueueRequest("t", {"a": {"b": [1, 2, {"c": None}]}, "d": (1, 2)}),  # nested, tuple
        EnqueueRequest("t", {"x": -0.0, "y": 1e300, "z": 2**63 - 1, "w": -(2**63)}),
        EnqueueRequest("t", {}, priority=3, max_attempts=2, timeout_s=5.0, delay_s=0.5),
        EnqueueRequest("t", {}, timeout_s=5, delay_s=1),  # ints where floats go: converted
        EnqueueRequest("t", {}, org="o", queue="q", idempotency_key="k"),
        EnqueueRequest("t", {}, run_at=datetime(2026, 2, 1, 12, tzinfo=PLUS_TWO)),
        EnqueueRequest("t", {}, subject=Subject(source_id="s", uri="u", revision="r")),
        EnqueueRequest("t", {}, subject=Subject(source_id="s", uri="u", op=SubjectOp.DELETE)),
    ],
    ids=lambda r: repr(r)[:60],
)
def test_requests_normalise_as_the_general_path(request_: EnqueueRequest) -> None:
    """Requests on either side of the fast path's conditions normalise as the general path."""
    assert_same(request_)


class _Text(str):
    """A str subclass: the walk takes it for a string, msgspec's encoder does not."""


def test_fast_path_copies_the_payload() -> None:
    """The normalised payload is not the caller's dict (mutating it later changes nothing)."""
    payload = {"i": 1}
    normalised = normalise_request(EnqueueRequest("t", payload))
    payload["i"] = 2
    assert normalised.payload == {"i": 1}


@pytest.mark.parametrize(
    ("request_", "message"),
    [
        (EnqueueRequest("t", {"n": float("nan")}), "JSON cannot represent"),
        (EnqueueRequest("t", {"n": float("inf")}), "JSON cannot represent"),
        (EnqueueRequest("t", {"n": 2**63}), "beyond 64 bits"),
        (EnqueueRequest("t", {"n": {"m": -(2**63) - 1}}), "beyond 64 bits"),
        (EnqueueRequest("t", {1: "x"}), "key that is not a string"),  # type: ignore[dict-item]
        (EnqueueRequest("t", {"k\x00": 1}), "NUL"),
        (EnqueueRequest("t", {"k": "\ud800"}), "lone surrogate"),
        (EnqueueRequest("t", {"k": object()}), "not JSON-serialisable"),
        (EnqueueRequest("t", {"k": _Text("x")}), "not JSON-serialisable"),
        (EnqueueRequest("t", {"k": [_Text("x")]}), "not JSON-serialisable"),
        (EnqueueRequest("t", {"k": "x" * MAX_PAYLOAD_BYTES}), "the limit is"),
        (EnqueueRequest("t", {}, priority=True), "enqueue request"),
        (EnqueueRequest("t", {}, priority=2**31), "32 bits"),
        (EnqueueRequest("t", {}, timeout_s=float("nan")), "timeout_s"),
        (EnqueueRequest("t", {}, org=""), "org"),
        (EnqueueRequest("", {}), "job_type"),
        (EnqueueRequest("t", {}, run_at=datetime(2026, 1, 1)), "time zone"),
        (EnqueueRequest("t", {}, subject=Subject(source_id="s", uri="")), "subject.uri"),
    ],
    ids=lambda x: repr(x)[:50],
)
def test_bad_requests_are_refused_as_before(request_: EnqueueRequest, message: str) -> None:
    """A request the general path refuses is refused with the same error."""
    with pytest.raises(InvalidRequestError) as fast:
        normalise_request(request_)
    assert message in str(fast.value)
    try:
        checked = general_path(request_)
        normalise_request(msgspec.structs.replace(checked, payload=checked.payload))
    except InvalidRequestError as general:
        assert str(general) == str(fast.value)
    else:  # pragma: no cover - the general path refuses every case above
        raise AssertionError("the general path accepted it")
