"""Enqueue on both backends: definitions, batches, idempotency keys, live-subject dedup."""

from __future__ import annotations

from datetime import timedelta

import pytest

from ledger import (
    DefinitionNotFoundError,
    EnqueueRequest,
    FakeClock,
    IdempotencyConflictError,
    InvalidRequestError,
    JobStatus,
    Ledger,
    Subject,
    SubjectOp,
)
from ledger.core.events import JobEnqueued


def test_enqueue_resolves_defaults_from_the_job_type(ledger: Ledger) -> None:
    """Unset fields come from the definition; the view row and history agree."""
    ledger.define("mail", max_attempts=3, default_timeout_s=60, default_priority=7)
    job_id = ledger.enqueue("mail", {"to": "a@example.com"}, org="acme", queue="bulk").job_id
    assert job_id is not None
    job = ledger.get(job_id)
    assert job is not None
    assert (job.status, job.priority, job.max_attempts, job.timeout_s) == (
        JobStatus.PENDING,
        7,
        3,
        60.0,
    )
    assert (job.org, job.queue, job.payload) == ("acme", "bulk", {"to": "a@example.com"})
    [record] = ledger.history(job_id)
    assert isinstance(record.event, JobEnqueued) and record.originator_version == 1


def test_unknown_and_disabled_types_are_refused_and_nothing_is_appended(ledger: Ledger) -> None:
    """job.definition_not_found_or_disabled; the events table is untouched."""
    ledger.define("off")
    ledger.set_enabled("off", False)
    before = ledger.store.head_position()
    for job_type in ("nope", "off"):
        with pytest.raises(DefinitionNotFoundError) as caught:
            ledger.enqueue(job_type, {})
        assert caught.value.code == "job.definition_not_found_or_disabled"
    assert ledger.store.head_position() == before
    ledger.set_enabled("off", True)
    assert ledger.enqueue("off", {}).outcome != "skipped"


def test_auto_define_mode_defines_unknown_types_with_defaults(
    db_url: str, clock: FakeClock
) -> None:
    """With auto_define the first enqueue of a type defines it (defaults of SEMANTICS)."""
    with Ledger.open(db_url, clock=clock, auto_define=True) as ledger:
        job_id = ledger.enqueue("fresh", {"n": 1}).job_id
        assert job_id is not None
        definition = ledger.definition("fresh")
        assert definition is not None
        assert (definition.max_attempts, definition.default_timeout_s) == (8, 900.0)
        assert (definition.default_priority, definition.enabled) == (100, True)


def test_redefining_identically_appends_nothing_and_a_change_is_an_update(
    ledger: Ledger,
) -> None:
    """define is idempotent; a changed definition appends job_type_updated."""
    ledger.define("t", max_attempts=2)
    before = ledger.store.head_position()
    ledger.define("t", max_attempts=2)
    assert ledger.store.head_position() == before
    ledger.define("t", max_attempts=5)
    assert ledger.store.head_position() == before + 1
    definition = ledger.definition("t")
    assert definition is not None and definition.max_attempts == 5


def test_enqueue_many_is_one_transaction_all_or_nothing(defined: Ledger) -> None:
    """A batch with one bad member appends nothing; a good batch appends every job."""
    good = [EnqueueRequest(job_type="t", payload={"i": i}) for i in range(50)]
    before = defined.store.head_position()
    with pytest.raises(DefinitionNotFoundError):
        defined.enqueue_many([*good, EnqueueRequest(job_type="missing")])
    with pytest.raises(InvalidRequestError):
        defined.enqueue_many([*good, EnqueueRequest(job_type="t", max_attempts=0)])
    assert defined.store.head_position() == before
    enqueued = defined.enqueue_many(good)
    assert len({e.job_id for e in enqueued}) == 50 and all(e.created for e in enqueued)
    assert defined.counts() == {"pending": 50}


# --- idempotency keys (runledger semantics) -------------------------------------------------


def test_same_request_with_a_key_returns_the_same_job_even_when_terminal(
    defined: Ledger,
) -> None:
    """A repeat with identical requested fields returns the existing id; nothing is appended."""
    first = defined.enqueue("t", {"a": 1}, priority=3, idempotency_key="k").job_id
    assert first is not None
    [job] = defined.claim("w")
    assert job.lease is not None
    defined.succeed(job.lease)
    before = defined.store.head_position()
    assert defined.enqueue("t", {"a": 1}, priority=3, idempotency_key="k").job_id == first
    assert defined.store.head_position() == before
    state = defined.get(first)
    assert state is not None and state.status is JobStatus.SUCCEEDED


@pytest.mark.parametrize(
    "change",
    [
        {"payload": {"a": 2}},
        {"priority": 4},
        {"max_attempts": 2},
        {"timeout_s": 5.0},
        {"run_at_shift_us": 1},
        {"priority": None},  # as requested: None is not the same as the resolved default
    ],
)
def test_a_different_request_with_the_same_key_conflicts(
    defined: Ledger, clock: FakeClock, change: dict[str, object]
) -> None:
    """Different payload/priority/max_attempts/timeout/run_at (to the µs) is a conflict."""
    run_at = clock.now() + timedelta(minutes=5)
    original: dict[str, object] = {"payload": {"a": 1}, "priority": 3, "run_at": run_at}
    first = defined.enqueue("t", idempotency_key="k", **original).job_id  # type: ignore[arg-type]
    repeat = dict(original)
    change = dict(change)  # parametrize shares the dict between backends
    shift = change.pop("run_at_shift_us", None)
    repeat.update(change)
    if shift is not None:
        repeat["run_at"] = run_at + timedelta(microseconds=int(shift))  # type: ignore[call-overload]
    before = defined.store.head_position()
    with pytest.raises(IdempotencyConflictError) as caught:
        defined.enqueue("t", idempotency_key="k", **repeat)  # type: ignore[arg-type]
    assert caught.value.code == "job.idempotency_conflict"
    assert caught.value.existing_job_id == first
    assert defined.store.head_position() == before


def test_global_and_per_org_keys_are_separate_namespaces(defined: Ledger) -> None:
    """The same key names different jobs globally, per org, and per job type."""
    defined.define("u")
    global_id = defined.enqueue("t", {}, idempotency_key="k").job_id
    acme_id = defined.enqueue("t", {}, idempotency_key="k", org="acme").job_id
    other_id = defined.enqueue("t", {}, idempotency_key="k", org="globex").job_id
    type_id = defined.enqueue("u", {}, idempotency_key="k").job_id
    assert len({global_id, acme_id, other_id, type_id}) == 4
    assert defined.enqueue("t", {}, idempotency_key="k", org="acme").job_id == acme_id


def test_idempotent_repeats_inside_one_batch(defined: Ledger) -> None:
    """Within enqueue_many, a repeat returns the first id; a conflicting one fails the batch."""
    request = EnqueueRequest(job_type="t", payload={"x": 1}, idempotency_key="k")
    first, repeat = defined.enqueue_many([request, request])
    assert (first.outcome, repeat.outcome) == ("created", "existing")
    assert first.job_id == repeat.job_id
    assert defined.counts() == {"pending": 1}
    clash = EnqueueRequest(job_type="t", payload={"x": 2}, idempotency_key="k2")
    with pytest.raises(IdempotencyConflictError):
        defined.enqueue_many(
            [EnqueueRequest(job_type="t", payload={"x": 1}, idempotency_key="k2"), clash]
        )
    assert defined.counts() == {"pending": 1}


# --- live subject dedup (haiku semantics) ---------------------------------------------------


def _subject(op: SubjectOp, revision: str | None = None) -> Subject:
    return Subject(source_id="src", uri="s3://b/k.md", op=op, revision=revision)


def test_a_live_job_blocks_another_for_the_same_subject_whatever_its_op(
    defined: Ledger,
) -> None:
    """A pending upsert blocks a delete and vice versa: the duplicate is skipped, naming the
    live job."""
    upsert = defined.enqueue("t", subject=_subject(SubjectOp.UPSERT, "e0")).job_id
    assert upsert is not None
    before = defined.store.head_position()
    skipped = defined.enqueue("t", subject=_subject(SubjectOp.DELETE))
    assert (skipped.outcome, skipped.job_id) == ("skipped", upsert)
    assert defined.enqueue("t", subject=_subject(SubjectOp.UPSERT, "e1")).outcome == "skipped"
    assert defined.store.head_position() == before
    other_uri = Subject(source_id="src", uri="s3://b/other.md")
    assert defined.enqueue("t", subject=other_uri).outcome != "skipped"


def test_a_leased_job_still_blocks_and_a_finished_one_does_not(defined: Ledger) -> None:
    """Leased counts as live; after success a new job for the subject is accepted."""
    first = defined.enqueue("t", subject=_subject(SubjectOp.DELETE)).job_id
    [job] = defined.claim("w")
    assert job.job_id == first and job.lease is not None
    assert defined.enqueue("t", subject=_subject(SubjectOp.UPSERT)).outcome == "skipped"
    defined.succeed(job.lease)
    second = defined.enqueue("t", subject=_subject(SubjectOp.UPSERT)).job_id
    assert second is not None and second != first


def test_subject_dedup_inside_one_batch(defined: Ledger) -> None:
    """Two jobs for one subject in a batch: the second is not enqueued; it names the first."""
    requests = [
        EnqueueRequest(job_type="t", subject=_subject(SubjectOp.UPSERT)),
        EnqueueRequest(job_type="t", subject=_subject(SubjectOp.DELETE)),
    ]
    first, second = defined.enqueue_many(requests)
    assert (first.outcome, second.outcome) == ("created", "skipped")
    assert second.job_id == first.job_id
