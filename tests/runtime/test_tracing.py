"""OpenTelemetry spans around handler runs, captured with the SDK's in-memory exporter."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from ledger import Ledger
from ledger.runtime.handlers import JobContext, PermanentError, Registry, TransientError
from ledger.testing import drain

SECRET = "payload-value-never-in-a-span"
_EXPORTER = InMemorySpanExporter()


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    """The SDK installed once for the process (OpenTelemetry allows one global provider),
    its finished spans cleared around each test."""
    if not isinstance(trace.get_tracer_provider(), TracerProvider):
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(_EXPORTER))
        trace.set_tracer_provider(provider)
    _EXPORTER.clear()
    yield _EXPORTER
    _EXPORTER.clear()


def registry() -> Registry:
    registry = Registry()

    @registry.handler("ok")
    async def ok(ctx: JobContext) -> dict[str, str]:
        with trace.get_tracer("app").start_as_current_span("app work"):
            return {"echo": ctx.payload["secret"]}

    @registry.handler("flaky")
    async def flaky(ctx: JobContext) -> None:
        raise TransientError(f"down: {ctx.payload['secret']}", code="downstream.down")

    @registry.handler("bad")
    def bad(ctx: JobContext) -> None:
        raise PermanentError(f"no: {ctx.payload['secret']}", code="input.bad")

    return registry


def run_spans(exporter: InMemorySpanExporter) -> dict[str, ReadableSpan]:
    return {span.name: span for span in exporter.get_finished_spans() if span.name != "app work"}


async def test_each_handler_run_is_a_span_with_its_outcome(
    ledger: Ledger, spans: InMemorySpanExporter
) -> None:
    """A success, a retryable failure and a permanent one are three ``process <type>`` spans
    (kind CONSUMER) naming the type, attempt and outcome, failures with status ERROR and
    their code; no attribute carries the payload or the error message."""
    for job_type in ("ok", "flaky", "bad"):
        ledger.define(job_type)
    ids = {t: ledger.enqueue(t, {"secret": SECRET}).job_id for t in ("ok", "flaky", "bad")}
    stats = await drain(ledger, registry())
    assert stats.claimed == 3
    by_name = run_spans(spans)
    assert set(by_name) == {"process ok", "process flaky", "process bad"}
    ok, flaky, bad = by_name["process ok"], by_name["process flaky"], by_name["process bad"]
    assert ok.kind is SpanKind.CONSUMER
    assert ok.attributes is not None and flaky.attributes is not None
    assert bad.attributes is not None
    assert dict(ok.attributes) == {
        "messaging.system": "jobledger",
        "messaging.operation.type": "process",
        "messaging.destination.name": "ok",
        "jobledger.job.type": "ok",
        "jobledger.job.id": str(ids["ok"]),
        "jobledger.job.run_number": 1,
        "jobledger.job.attempt": 1,
        "jobledger.job.outcome": "succeeded",
    }
    assert ok.status.status_code is StatusCode.UNSET
    assert flaky.attributes["jobledger.job.outcome"] == "retryable"
    assert flaky.attributes["jobledger.job.failure_code"] == "downstream.down"
    assert (flaky.status.status_code, flaky.status.description) == (
        StatusCode.ERROR,
        "downstream.down",
    )
    assert bad.attributes["jobledger.job.outcome"] == "terminal"
    assert bad.status.status_code is StatusCode.ERROR
    for span in by_name.values():
        assert span.attributes is not None
        assert not any(SECRET in str(value) for value in span.attributes.values())
        assert not span.events  # no exception recorded (its message would hold the payload)


async def test_a_handlers_own_spans_are_children_of_its_run(
    ledger: Ledger, spans: InMemorySpanExporter
) -> None:
    """The run's span is current while the handler runs: the handler's spans nest in it."""
    ledger.define("ok")
    ledger.enqueue("ok", {"secret": "x"})
    await drain(ledger, registry())
    [run] = run_spans(spans).values()
    [child] = [s for s in spans.get_finished_spans() if s.name == "app work"]
    assert child.parent is not None and run.context is not None
    assert child.parent.span_id == run.context.span_id
