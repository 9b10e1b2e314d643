"""The batch enqueue plan (ledger/core/enqueue_plan.py), with no database."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from uuid import UUID

import pytest

from ledger.core.enqueue_plan import (
    EnqueuePlan,
    IdempotencyKey,
    KeyedJob,
    SubjectKey,
    idempotency_key,
    plan_enqueue,
    subject_key,
)
from ledger.core.errors import DefinitionNotFoundError, IdempotencyConflictError
from ledger.core.events import JobEnqueued, JobTypeDefined
from ledger.core.requests import normalise_request
from ledger.core.values import EnqueueRequest, JobDefinition, Subject, SubjectOp

NOW = datetime(2026, 1, 1, tzinfo=UTC)
DEFINED = {"t": JobDefinition(job_type="t", default_priority=7)}


def ids() -> Callable[[], UUID]:
    """An id factory handing out UUID(int=1), UUID(int=2), … in call order."""
    issued = iter(range(1, 1000))
    return lambda: UUID(int=next(issued))


def request(job_type: str = "t", **fields: object) -> EnqueueRequest:
    return normalise_request(EnqueueRequest(job_type=job_type, **fields))  # type: ignore[arg-type]


def subject(uri: str, source_id: str = "s") -> Subject:
    return Subject(source_id=source_id, uri=uri, op=SubjectOp.UPSERT, revision="r1")


def plan(
    requests: Sequence[EnqueueRequest],
    *,
    definitions: Mapping[str, JobDefinition] = DEFINED,
    stored_keys: Mapping[IdempotencyKey, KeyedJob] | None = None,
    live_subjects: Mapping[SubjectKey, UUID] | None = None,
    auto_define: bool = False,
) -> EnqueuePlan:
    return plan_enqueue(
        requests,
        definitions,
        stored_keys=stored_keys or {},
        live_subjects=live_subjects or {},
        now=NOW,
        auto_define=auto_define,
        new_id=ids(),
    )


def test_new_jobs_get_ids_in_request_order_and_one_enqueued_event_each() -> None:
    """Each plain request is a new job: the factory's next id, a JobEnqueued at now."""
    planned = plan([request(payload={"n": 1}), request(payload={"n": 2})])
    assert planned.results == [UUID(int=1), UUID(int=2)]
    assert [job_id for job_id, _ in planned.job_changes] == [UUID(int=1), UUID(int=2)]
    for job_id, events in planned.job_changes:
        [event] = events
        assert isinstance(event, JobEnqueued)
        assert event.job_id == job_id and event.at == NOW and event.priority == 7
    assert planned.definition_changes == []


def test_an_in_batch_idempotent_repeat_returns_the_first_id() -> None:
    """The second request with the same key and fields names the first one's job."""
    first = request(payload={"a": 1}, idempotency_key="k")
    planned = plan([first, request(payload={"a": 1}, idempotency_key="k")])
    assert planned.results == [UUID(int=1), UUID(int=1)]
    assert len(planned.job_changes) == 1


def test_an_in_batch_repeat_with_other_fields_is_a_conflict_naming_the_first_job() -> None:
    """Same key, different payload, in one batch: IdempotencyConflictError for job 1."""
    batch = [request(payload={"a": 1}, idempotency_key="k"), request(idempotency_key="k")]
    with pytest.raises(IdempotencyConflictError) as raised:
        plan(batch)
    assert raised.value.existing_job_id == UUID(int=1)
    assert raised.value.code == "job.idempotency_conflict"


def test_a_repeat_of_a_stored_key_returns_the_stored_job_and_appends_nothing() -> None:
    """A key the store already holds with the same fields names that job; no id is used."""
    stored_id = UUID(int=99)
    repeat = request(payload={"a": 1}, idempotency_key="k")
    stored = {("t", "", "k"): KeyedJob(stored_id, repeat)}
    planned = plan([repeat, request()], stored_keys=stored)
    assert planned.results == [stored_id, UUID(int=1)]
    assert [job_id for job_id, _ in planned.job_changes] == [UUID(int=1)]


def test_a_stored_key_with_other_fields_is_a_conflict_naming_the_stored_job() -> None:
    """The store's holder of the key asked for something else: conflict, nothing planned."""
    stored = {("t", "", "k"): KeyedJob(UUID(int=99), request(idempotency_key="k"))}
    with pytest.raises(IdempotencyConflictError) as raised:
        plan([request(payload={"b": 2}, idempotency_key="k")], stored_keys=stored)
    assert raised.value.existing_job_id == UUID(int=99)


def test_keys_are_namespaced_by_job_type_and_org() -> None:
    """The same key under another org or another type is another job."""
    definitions = {**DEFINED, "u": JobDefinition(job_type="u")}
    batch = [
        request(idempotency_key="k"),
        request(idempotency_key="k", org="acme"),
        request("u", idempotency_key="k"),
    ]
    assert plan(batch, definitions=definitions).results == [UUID(int=n) for n in (1, 2, 3)]
    assert idempotency_key(batch[1]) == ("t", "acme", "k")
    assert idempotency_key(request()) is None


def test_a_second_job_for_a_subject_in_the_batch_is_deduplicated_to_none() -> None:
    """Two requests for one subject: the first is enqueued, the second's result is None
    and names the first as the live job that skipped it."""
    planned = plan([request(subject=subject("a")), request(subject=subject("a"))])
    assert planned.results == [UUID(int=1), None]
    assert planned.skipped_by == [None, UUID(int=1)]
    assert len(planned.job_changes) == 1
    assert subject_key(request(subject=subject("a"))) == ("s", "a")


def test_a_subject_with_a_live_stored_job_is_deduplicated_to_none() -> None:
    """A subject the store says is live gets None, naming the live job; other subjects are
    enqueued."""
    planned = plan(
        [request(subject=subject("a")), request(subject=subject("b"))],
        live_subjects={("s", "a"): UUID(int=77)},
    )
    assert planned.results == [None, UUID(int=1)]
    assert planned.skipped_by == [UUID(int=77), None]


def test_an_idempotent_repeat_is_answered_before_the_subject_rule() -> None:
    """A keyed repeat for a live subject names its job (not None), as across batches."""
    first = request(subject=subject("a"), idempotency_key="k")
    planned = plan([first, request(subject=subject("a"), idempotency_key="k")])
    assert planned.results == [UUID(int=1), UUID(int=1)]


def test_auto_define_defines_each_unknown_type_once_with_the_defaults() -> None:
    """Unknown types get one JobTypeDefined each (sorted), and their jobs are enqueued."""
    planned = plan([request("z"), request("y"), request("z"), request("t")], auto_define=True)
    assert [job_type for job_type, _ in planned.definition_changes] == ["y", "z"]
    for job_type, events in planned.definition_changes:
        [event] = events
        assert isinstance(event, JobTypeDefined) and event.at == NOW
        assert event.definition == JobDefinition(job_type=job_type)
    assert planned.results == [UUID(int=n) for n in (1, 2, 3, 4)]


def test_auto_define_defines_a_type_even_if_all_its_requests_are_repeats() -> None:
    """The definition does not depend on whether a job of the type is created."""
    stored = {("n", "", "k"): KeyedJob(UUID(int=99), request("n", idempotency_key="k"))}
    planned = plan([request("n", idempotency_key="k")], stored_keys=stored, auto_define=True)
    assert planned.results == [UUID(int=99)] and planned.job_changes == []
    assert [job_type for job_type, _ in planned.definition_changes] == ["n"]


def test_an_unknown_type_is_refused_without_auto_define() -> None:
    """DefinitionNotFoundError names the type as not defined."""
    with pytest.raises(DefinitionNotFoundError, match="'nope' is not defined"):
        plan([request(), request("nope")])


def test_a_disabled_type_is_refused_even_with_auto_define() -> None:
    """A defined but disabled type is not redefined: the request is refused."""
    disabled = {"t": JobDefinition(job_type="t", enabled=False)}
    with pytest.raises(DefinitionNotFoundError, match="'t' is disabled") as raised:
        plan([request()], definitions=disabled, auto_define=True)
    assert raised.value.code == "job.definition_not_found_or_disabled"


def test_the_first_refused_request_in_order_decides_the_error() -> None:
    """An unknown type before a conflict raises the definition error, not the conflict."""
    stored = {("t", "", "k"): KeyedJob(UUID(int=99), request(idempotency_key="k"))}
    batch = [request("nope"), request(payload={"b": 2}, idempotency_key="k")]
    with pytest.raises(DefinitionNotFoundError):
        plan(batch, stored_keys=stored)


def test_delays_are_resolved_against_now() -> None:
    """delay_s puts run_at at now + delay (the plan passes its now to the decision)."""
    [(_, [event])] = plan([request(delay_s=30)]).job_changes
    assert isinstance(event, JobEnqueued) and event.run_at == NOW + timedelta(seconds=30)
