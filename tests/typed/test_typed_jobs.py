"""Typed jobs (``@registry.job``): the payload validated at enqueue, decoded for the handler,
the output decoded for the caller, and the declaration's options as the type's definition,
on both backends."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import msgspec
import pytest

from ledger import (
    EnqueueRequest,
    InvalidRequestError,
    JobContext,
    KeywordJob,
    Ledger,
    Registry,
    Subject,
    SyncJobContext,
    TypedJob,
)
from ledger.testing import drain


class Charge(msgspec.Struct, frozen=True):
    amount: int
    currency: str = "EUR"
    at: datetime | None = None


class Receipt(msgspec.Struct, frozen=True):
    charged: int
    currency: str


def charge_registry(seen: list[Any]) -> tuple[Registry, TypedJob[Charge, Receipt]]:
    """``card.charge``: an async handler that records what it was given."""
    registry = Registry()

    @registry.job("card.charge", max_attempts=5, timeout_s=30, priority=7)
    async def charge(ctx: JobContext, payload: Charge) -> Receipt:
        seen.append(payload)
        return Receipt(charged=payload.amount, currency=payload.currency)

    return registry, charge


async def test_the_handler_gets_the_struct_and_the_caller_its_output(ledger: Ledger) -> None:
    """A Struct payload round-trips: the handler receives a Charge equal to the one
    enqueued (a datetime field included), and output() decodes the Receipt it returned."""
    seen: list[Any] = []
    registry, charge = charge_registry(seen)
    sent = Charge(amount=1250, currency="USD", at=datetime(2026, 1, 2, 3, 4, tzinfo=UTC))
    job = charge.enqueue(ledger, sent)
    assert ledger.get(job.job_id).payload == {  # type: ignore[union-attr]
        "amount": 1250,
        "currency": "USD",
        "at": "2026-01-02T03:04:00Z",
    }
    assert (await drain(ledger, registry)).succeeded == 1
    assert seen == [sent] and type(seen[0]) is Charge
    assert job.output() == Receipt(charged=1250, currency="USD")
    assert ledger.get(job.job_id).output == {"charged": 1250, "currency": "USD"}  # type: ignore[union-attr]


@pytest.mark.parametrize(
    "payload",
    [Charge(amount="12"), {"amount": 1, "currency": 2}, {"currency": "EUR"}, 42],  # type: ignore[arg-type]
    ids=["wrong-field-type", "wrong-dict", "missing-field", "not-an-object"],
)
def test_a_wrong_payload_is_request_invalid_and_writes_nothing(
    ledger: Ledger, payload: Any
) -> None:
    """A payload msgspec rejects raises InvalidRequestError (request.invalid) carrying
    msgspec's message, before anything is written: no job, not even the type's definition."""
    _, charge = charge_registry([])
    before = ledger.store.head_position()
    with pytest.raises(InvalidRequestError) as raised:
        charge.enqueue(ledger, payload)
    assert raised.value.code == "request.invalid"
    assert "Expected" in str(raised.value) or "missing required field" in str(raised.value)
    assert ledger.store.head_position() == before
    assert ledger.definition("card.charge") is None


def test_one_wrong_payload_refuses_the_whole_batch(ledger: Ledger) -> None:
    """enqueue_many validates every payload first: one bad one, nothing written."""
    _, charge = charge_registry([])
    before = ledger.store.head_position()
    with pytest.raises(InvalidRequestError, match=r"\$\.amount"):
        charge.enqueue_many(ledger, [Charge(amount=1), Charge(amount="x")])  # type: ignore[arg-type]
    assert ledger.store.head_position() == before


def test_the_first_enqueue_defines_the_type_from_the_declaration(ledger: Ledger) -> None:
    """An undefined type is defined with the decorator's options at the first enqueue, and
    the job takes them (max attempts, timeout, priority)."""
    _, charge = charge_registry([])
    job = charge.enqueue(ledger, Charge(amount=1))
    definition = ledger.definition("card.charge")
    assert definition is not None
    assert (definition.max_attempts, definition.default_timeout_s, definition.default_priority) == (
        5,
        30.0,
        7,
    )
    state = ledger.get(job.job_id)
    assert state is not None and (state.max_attempts, state.priority) == (5, 7)


def test_a_stored_definition_wins_over_the_declaration(ledger: Ledger) -> None:
    """A type an operator defined keeps its definition: enqueue through the declaration
    leaves it as it is and the job takes the stored options."""
    ledger.define("card.charge", max_attempts=2)
    _, charge = charge_registry([])
    job = charge.enqueue(ledger, Charge(amount=1))
    assert ledger.definition("card.charge").max_attempts == 2  # type: ignore[union-attr]
    assert ledger.get(job.job_id).max_attempts == 2  # type: ignore[union-attr]


def test_an_auto_define_ledger_defines_a_typed_job_from_its_declaration(db_url: str) -> None:
    """auto_define would define an unknown type with the bare defaults; a typed job's first
    enqueue defines it from the declaration instead."""
    _, charge = charge_registry([])
    with Ledger.open(db_url, auto_define=True) as auto:
        charge.enqueue(auto, Charge(amount=1))
        assert auto.definition("card.charge").max_attempts == 5  # type: ignore[union-attr]


def test_a_typed_request_joins_a_mixed_batch(ledger: Ledger) -> None:
    """TypedJob.request gives the validated EnqueueRequest for Ledger.enqueue_many."""
    _, charge = charge_registry([])
    ledger.define("card.charge")
    ledger.define("plain")
    typed, plain = ledger.enqueue_many(
        [charge.request(Charge(amount=3), org="acme"), EnqueueRequest("plain", {"x": 1})]
    )
    assert ledger.get(typed.job_id).payload == {"amount": 3, "currency": "EUR", "at": None}  # type: ignore[union-attr]
    assert ledger.get(typed.job_id).org == "acme"  # type: ignore[union-attr]
    assert plain.created


def keyword_registry(seen: list[dict[str, Any]]) -> tuple[Registry, KeywordJob[..., Any]]:
    """``mail.send``: a sync handler with keyword parameters, one defaulted."""
    registry = Registry()

    @registry.job("mail.send", max_attempts=2)
    def send(
        ctx: SyncJobContext, *, to: str, retries: int = 0, tags: list[str] | None = None
    ) -> dict[str, Any]:
        ctx.progress(stage="sending")  # a plain call on a sync handler's context
        seen.append({"to": to, "retries": retries, "tags": tags})
        return {"sent_to": to}

    return registry, send


async def test_a_keyword_job_validates_its_parameters_and_calls_with_them(
    ledger: Ledger,
) -> None:
    """Keyword parameters are the payload: stored with their defaults, the handler called
    with them; options go through with_options."""
    seen: list[dict[str, Any]] = []
    registry, send = keyword_registry(seen)
    first = send.with_options(idempotency_key="welcome-ada").enqueue(ledger, to="ada")
    again = send.with_options(idempotency_key="welcome-ada").enqueue(ledger, to="ada")
    assert (first.outcome, again.outcome, again.job_id) == ("created", "existing", first.job_id)
    assert ledger.get(first.job_id).payload == {"to": "ada", "retries": 0, "tags": None}  # type: ignore[union-attr]
    send.enqueue_many(ledger, [send.payload(to="bo", tags=["vip"]), {"to": "cy", "retries": 1}])
    assert (await drain(ledger, registry)).succeeded == 3
    assert sorted(seen, key=lambda s: s["to"]) == [
        {"to": "ada", "retries": 0, "tags": None},
        {"to": "bo", "retries": 0, "tags": ["vip"]},
        {"to": "cy", "retries": 1, "tags": None},
    ]
    assert first.output() == {"sent_to": "ada"}


@pytest.mark.parametrize(
    ("args", "kwargs", "says"),
    [
        ((), {"to": 3}, "Expected `str`, got `int`"),
        ((), {}, "missing a required argument: 'to'"),
        ((), {"to": "a", "cc": "b"}, "unexpected keyword argument 'cc'"),
        (("a",), {}, "too many positional arguments"),
        (
            ({"to": "a"},),
            {},
            r"passed as keywords: enqueue\(ledger, to=\.\.\., retries=\.\.\., tags=\.\.\.\)",
        ),
    ],
    ids=["wrong-type", "missing", "unknown", "positional", "a-dict-says-how"],
)
def test_a_keyword_job_refuses_bad_parameters_before_writing(
    ledger: Ledger, args: tuple[Any, ...], kwargs: dict[str, Any], says: str
) -> None:
    """Wrong parameters are request.invalid with the reason, and nothing is written."""
    _, send = keyword_registry([])
    before = ledger.store.head_position()
    with pytest.raises(InvalidRequestError, match=says):
        send.enqueue(ledger, *args, **kwargs)
    assert ledger.store.head_position() == before


async def test_a_stored_payload_that_no_longer_decodes_fails_permanently(
    ledger: Ledger,
) -> None:
    """A job whose stored payload is not the handler's type (enqueued as a plain dict by a
    string type) dies at once with job.payload_invalid rather than retrying."""
    seen: list[Any] = []
    registry, _ = charge_registry(seen)
    ledger.define("card.charge", max_attempts=5)
    job = ledger.enqueue("card.charge", {"amount": "lots"})
    assert (await drain(ledger, registry)).dead == 1
    state = job.job()
    assert state.last_error is not None and state.last_error.code == "job.payload_invalid"
    assert seen == []


def test_a_typed_skipped_enqueue_names_the_live_job(ledger: Ledger) -> None:
    """Through a typed job too, a subject with a live job is skipped, naming that job."""
    _, charge = charge_registry([])
    subject = Subject(source_id="cards", uri="card/1")
    first = charge.enqueue(ledger, Charge(amount=1), subject=subject)
    second = charge.enqueue(ledger, Charge(amount=2), subject=subject)
    assert (second.outcome, second.job_id) == ("skipped", first.job_id)


def test_declaring_a_job_type_twice_is_refused() -> None:
    """One handler per type, as with registry.handler."""
    registry = Registry()

    @registry.job("dup")
    def first(ctx: SyncJobContext, *, n: int) -> None: ...

    with pytest.raises(ValueError, match="already registered"):

        @registry.job("dup")
        def second(ctx: SyncJobContext, *, n: int) -> None: ...


async def test_a_callable_object_can_be_a_typed_handler(ledger: Ledger) -> None:
    """An instance with an async __call__ is declared like a function (its hints read from
    __call__), and runs as an async handler."""
    registry = Registry()

    class Charger:
        async def __call__(self, ctx: JobContext, payload: Charge) -> Receipt:
            return Receipt(charged=payload.amount * 2, currency=payload.currency)

    charger = registry.job("card.charge")(Charger())
    job = charger.enqueue(ledger, Charge(amount=4))
    assert registry.get("card.charge").is_async  # type: ignore[union-attr]
    assert (await drain(ledger, registry)).succeeded == 1
    assert job.output() == Receipt(charged=8, currency="EUR")
