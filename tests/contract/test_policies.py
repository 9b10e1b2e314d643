"""Policies on both backends: follow-ups commit with their trigger, or roll back with it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any
from uuid import UUID

import psycopg
import pytest

from ledger import Completion, Failure, FailureKind, JobStatus, Ledger
from ledger.core import decide
from ledger.core.errors import DefinitionNotFoundError
from ledger.core.events import JobCancelled, JobDeadLettered, JobEnqueued, JobSucceeded
from ledger.core.policy import (
    Facts,
    JobEvents,
    Needs,
    Policy,
    PolicyCascadeError,
    Trigger,
    follow_up_id,
)
from ledger.core.values import EnqueueRequest
from ledger.store.unit_of_work import UnitOfWork

TERMINAL = Failure(kind=FailureKind.TERMINAL, code="bad", message="m")


class EnqueueAfterSuccess(Policy):
    """When a job of type ``a`` succeeds, enqueue one job of type ``then`` (once)."""

    name = "enqueue_after_success"

    def __init__(self, then: str = "b") -> None:
        self.then = then

    def needs(self, trigger: Trigger) -> Needs | None:
        if not isinstance(trigger.event, JobSucceeded) or trigger.state.job_type != "a":
            return None
        return Needs(jobs=(follow_up_id(self, trigger),), job_types=(self.then,))

    def react(self, trigger: Trigger, facts: Facts) -> list[JobEvents]:
        job_id = follow_up_id(self, trigger)
        if job_id in facts.jobs:
            return []
        request = EnqueueRequest(job_type=self.then, payload={"after": str(trigger.job_id)})
        definition = facts.definitions.get(self.then)
        return [(job_id, [decide.decide_enqueue(job_id, request, definition, facts.now)])]


class CancelPartnerOnDeath(Policy):
    """When a job dies, cancel the live job its payload names as ``partner``."""

    name = "cancel_partner_on_death"

    def needs(self, trigger: Trigger) -> Needs | None:
        partner = trigger.state.request.payload.get("partner")
        if not isinstance(trigger.event, JobDeadLettered) or not isinstance(partner, str):
            return None
        return Needs(jobs=(UUID(partner),))

    def react(self, trigger: Trigger, facts: Facts) -> list[JobEvents]:
        partner = facts.jobs.get(UUID(str(trigger.state.request.payload["partner"])))
        if partner is None or not partner.status.is_live:
            return []
        reason = f"partner {trigger.job_id} died"
        return [(partner.job_id, [decide.decide_cancel(partner, facts.now, reason)])]


class EnqueueForever(Policy):
    """Every ``loop`` job enqueues another: a cycle."""

    name = "enqueue_forever"

    def needs(self, trigger: Trigger) -> Needs | None:
        if isinstance(trigger.event, JobEnqueued) and trigger.state.job_type == "loop":
            return Needs(job_types=("loop",))
        return None

    def react(self, trigger: Trigger, facts: Facts) -> list[JobEvents]:
        job_id = follow_up_id(self, trigger)
        request = EnqueueRequest(job_type="loop")
        return [
            (job_id, [decide.decide_enqueue(job_id, request, facts.definitions["loop"], facts.now)])
        ]


@pytest.fixture
def ab(ledger: Ledger) -> Iterator[Ledger]:
    """The ledger with types ``a`` and ``b`` defined and the store's policies reset after."""
    ledger.define("a", max_attempts=1)
    ledger.define("b")
    yield ledger
    ledger.store.policies = ()


def _claim_one(ledger: Ledger, job_type: str) -> Any:
    [job] = ledger.claim("w", types=[job_type])
    assert job.lease is not None
    return job.lease


def test_a_follow_up_commits_with_its_trigger_and_replays_to_the_same_views(
    ab: Ledger, db_url: str
) -> None:
    """A's success and B's enqueue are appended by one unit of work, next to each other,
    stamped with the same time; the caller sees only A; B is claimable; verify is clean and
    a rebuild reproduces the views."""
    ab.store.policies = (EnqueueAfterSuccess(),)
    a = ab.enqueue("a").job_id
    assert a is not None
    lease = _claim_one(ab, "a")
    before = ab.store.head_position()
    state = ab.succeed(lease)
    assert state.job_id == a and state.status is JobStatus.SUCCEEDED
    assert ab.store.head_position() == before + 2
    [b] = [job.job_id for job in ab.claim("w", types=["b"])]
    enqueued_b = ab.history(b)[0].event
    [succeeded_a] = [r.event for r in ab.history(a) if isinstance(r.event, JobSucceeded)]
    assert isinstance(enqueued_b, JobEnqueued)
    assert enqueued_b.at == succeeded_a.at and enqueued_b.request.payload == {"after": str(a)}
    if db_url.startswith("postgresql"):
        with psycopg.connect(db_url) as conn:
            rows = conn.execute(
                "SELECT DISTINCT xmin::text FROM jl_events WHERE notification_id BETWEEN %s AND %s",
                (before + 1, before + 2),
            ).fetchall()
        assert len(rows) == 1  # one transaction wrote both events
    assert ab.projections().verify().clean
    ab.projections().rebuild()
    assert ab.projections().verify().clean


def test_a_failing_follow_up_rolls_back_its_trigger(ab: Ledger) -> None:
    """A follow-up whose decision fails (its job type is not defined) fails the command and
    leaves nothing: A is still leased, its history and the head are as before."""
    ab.store.policies = (EnqueueAfterSuccess(then="undefined"),)
    a = ab.enqueue("a").job_id
    assert a is not None
    lease = _claim_one(ab, "a")
    before, history = ab.store.head_position(), ab.history(a)
    with pytest.raises(DefinitionNotFoundError):
        ab.succeed(lease)
    assert ab.store.head_position() == before
    assert ab.history(a) == history
    current = ab.get(a)
    assert current is not None and current.status is JobStatus.LEASED
    assert ab.projections().verify().clean


def test_a_follow_up_on_an_existing_job_reads_and_changes_it_in_the_same_unit(
    ab: Ledger,
) -> None:
    """A's death cancels its live partner P (read and locked in A's unit of work); the
    dead-letter view has A, the queue P cancelled, and the caller sees A's state."""
    ab.store.policies = (CancelPartnerOnDeath(),)
    partner = ab.enqueue("b").job_id
    a = ab.enqueue("a", {"partner": str(partner)}).job_id
    assert a is not None and partner is not None
    lease = _claim_one(ab, "a")
    dead = ab.fail(lease, TERMINAL)
    assert dead.job_id == a and dead.status is JobStatus.DEAD
    cancelled = ab.get(partner)
    assert cancelled is not None and cancelled.status is JobStatus.CANCELLED
    [event] = [r.event for r in ab.history(partner) if isinstance(r.event, JobCancelled)]
    assert event.reason == f"partner {a} died"
    assert [d.job_id for d in ab.dead_letters()] == [a]
    assert ab.projections().verify().clean


def test_a_batch_reports_only_its_own_jobs(ab: Ledger) -> None:
    """``succeed_many`` whose successes enqueue follow-ups accepts exactly the completed jobs."""
    ab.store.policies = (EnqueueAfterSuccess(),)
    ab.enqueue_many([EnqueueRequest(job_type="a")] * 3)
    jobs = ab.claim("w", types=["a"], limit=3)
    result = ab.succeed_many([Completion(lease=j.lease) for j in jobs if j.lease])
    assert sorted(s.job_id for s in result.accepted) == sorted(j.job_id for j in jobs)
    assert ab.counts() == {"succeeded": 3, "pending": 3}
    assert ab.projections().verify().clean


def test_a_cycle_is_stopped_at_the_depth_bound_and_nothing_commits(ab: Ledger) -> None:
    """An enqueue whose follow-ups never end raises the typed error; no job, no event."""
    ab.define("loop")
    ab.store.policies = (EnqueueForever(),)
    before = ab.store.head_position()
    with pytest.raises(PolicyCascadeError) as raised:
        ab.enqueue("loop")
    assert raised.value.code == "policy.cascade_too_deep"
    assert ab.store.head_position() == before
    assert ab.counts() == {}


def test_no_policy_means_no_extra_read_per_append(
    ab: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A succeed reads one job (its lock) with no policy and with an uninterested one; an
    interested policy adds its own lock and definition read, and nothing more."""
    with ab.store.unit_of_work() as uow:
        backend: type[UnitOfWork] = type(uow)
    reads: list[str] = []
    for hook in ("_fetch_jobs", "_fetch_states", "_fetch_events"):
        real = getattr(backend, hook)

        def spy(self: UnitOfWork, *args: Any, _real: Any = real, _hook: str = hook) -> Any:
            reads.append(_hook)
            return _real(self, *args)

        monkeypatch.setattr(backend, hook, spy)

    def reads_of_one_success(*policies: Policy) -> list[str]:
        ab.store.policies = policies
        ab.enqueue("a")
        lease = _claim_one(ab, "a")
        reads.clear()
        ab.succeed(lease)
        return list(reads)

    assert reads_of_one_success() == ["_fetch_jobs"]
    assert reads_of_one_success(CancelPartnerOnDeath()) == ["_fetch_jobs"]
    assert reads_of_one_success(EnqueueAfterSuccess()) == [
        "_fetch_jobs",
        "_fetch_jobs",
        "_fetch_states",
    ]
