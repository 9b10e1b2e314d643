"""A batch large enough for PostgreSQL's COPY path writes what small pipelined batches write,
on both backends (SQLite has one path: the test pins that the two backends agree)."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any
from uuid import UUID

import msgspec
import pytest

from ledger import (
    Enqueued,
    EnqueueRequest,
    FakeClock,
    IdempotencyConflictError,
    Ledger,
    Subject,
)
from ledger.store.postgres import bulk_writes
from ledger.store.postgres.bulk_writes import COPY_THRESHOLD

LARGE = COPY_THRESHOLD + 40
SMALL_CHUNK = COPY_THRESHOLD // 4


def _requests(prefix: str, clock: FakeClock) -> list[EnqueueRequest]:
    """A varied batch whose names all carry ``prefix`` (so two batches never collide), with
    repeats inside it: every 10th request repeats an idempotency key with the same fields,
    every 15th a live subject."""
    requests = []
    for i in range(LARGE):
        key = f"{prefix}-key-{i - 1 if i % 10 == 9 else i}" if i % 3 == 0 or i % 10 == 9 else None
        subject = None
        if i % 5 == 0:
            uri = f"doc-{i - 5 if i % 15 == 0 and i else i}"
            subject = Subject(source_id=f"{prefix}-source", uri=uri)
        requests.append(
            EnqueueRequest(
                "bulk",
                {"i": i % 10 if key else i, "nested": {"list": [1, 2.5, None, "x"]}},
                priority=i % 4,
                queue=f"{prefix}-q{i % 3}",
                org=f"{prefix}-org" if i % 2 else None,
                run_at=clock.now() + timedelta(seconds=i % 7) if i % 6 == 1 else None,
                idempotency_key=key,
                subject=subject,
            )
        )
    # Repeats with identical fields: point each repeat at the request it repeats.
    for i, request in enumerate(requests):
        if i % 10 == 9 and request.idempotency_key is not None:
            requests[i] = requests[i - 1] if requests[i - 1].idempotency_key else request
    return requests


def _shape(ledger: Ledger, results: list[UUID | None], prefix: str) -> str:
    """What a batch left, with its job ids numbered by first appearance and its prefix
    blanked: results, each job's state and history."""
    numbered: dict[UUID, str] = {}
    for job_id in results:
        if job_id is not None:
            numbered.setdefault(job_id, f"job#{len(numbered)}")
    states = ledger.get_many(list(numbered))
    histories = {job_id: ledger.history(job_id) for job_id in numbered}
    text = json.dumps(
        msgspec.to_builtins(
            {
                "results": [str(r) if r else None for r in results],
                "states": [states[job_id] for job_id in numbered],
                "histories": [
                    [(r.originator_version, r.event) for r in histories[job_id]]
                    for job_id in numbered
                ],
            }
        )
    )
    for job_id, number in numbered.items():
        text = text.replace(str(job_id), number)
    return text.replace(prefix, "P")


def _ids(enqueued: list[Enqueued[Any]]) -> list[UUID | None]:
    """The job ids, ``None`` for a request a live subject skipped (as the plan has them)."""
    return [None if e.outcome == "skipped" else e.job_id for e in enqueued]


def test_a_batch_above_the_copy_threshold_leaves_what_small_batches_leave(
    ledger: Ledger, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Same results (repeats and live subjects deduplicated alike), states, histories and
    claim order, the COPY split in several statements; the views verify clean and decision
    replay finds nothing."""
    monkeypatch.setattr(bulk_writes, "COPY_ROWS", 97)
    ledger.define("bulk")
    small_requests = _requests("small", clock)
    small: list[UUID | None] = []
    for start in range(0, LARGE, SMALL_CHUNK):
        small += _ids(ledger.enqueue_many(small_requests[start : start + SMALL_CHUNK]))
    large = _ids(ledger.enqueue_many(_requests("large", clock)))
    assert None in large and len(set(large)) < LARGE  # the repeats were deduplicated
    assert _shape(ledger, large, "large") == _shape(ledger, small, "small")

    clock.advance(10)  # every job due
    order = {}
    for prefix, results in (("small", small), ("large", large)):
        queues = [f"{prefix}-q{q}" for q in range(3)]
        claimed = ledger.claim("w", limit=LARGE, queues=queues)
        index = {job_id: i for i, job_id in reversed(list(enumerate(results)))}
        order[prefix] = [index[state.job_id] for state in claimed]
    assert order["large"] == order["small"]

    assert ledger.projections().verify().clean
    assert all(not replay.findings for replay in ledger.replay_check_all())


def test_a_large_batch_refuses_a_conflicting_key_and_repeats_a_stored_one(
    ledger: Ledger, clock: FakeClock
) -> None:
    """A key reused with other fields inside a large batch refuses the whole batch (nothing
    appended); the same batch again names the jobs it created and appends nothing."""
    ledger.define("bulk")
    requests = [EnqueueRequest("bulk", {"i": i}, idempotency_key=f"k{i}") for i in range(LARGE)]
    conflicting = [*requests, EnqueueRequest("bulk", {"i": -1}, idempotency_key="k0")]
    before = ledger.store.head_position()
    with pytest.raises(IdempotencyConflictError):
        ledger.enqueue_many(conflicting)
    assert ledger.store.head_position() == before
    first = [e.job_id for e in ledger.enqueue_many(requests)]
    head = ledger.store.head_position()
    assert [e.job_id for e in ledger.enqueue_many(requests)] == first
    assert ledger.store.head_position() == head
    assert ledger.counts() == {"pending": LARGE}
