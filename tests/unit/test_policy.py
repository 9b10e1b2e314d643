"""Policies, database-free: who is asked, what they see, and the cascade's depth bound."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from uuid import UUID, uuid4

import msgspec
import pytest

from ledger.core import decide
from ledger.core.errors import InvalidTransitionError, LedgerError
from ledger.core.events import JobEnqueued
from ledger.core.policy import (
    Facts,
    JobEvents,
    Needs,
    Policy,
    PolicyCascadeError,
    Trigger,
    ask,
    cascade,
    follow_up_id,
    react,
)
from ledger.core.state import JobState, evolve
from ledger.core.values import EnqueueRequest, JobDefinition

T0 = datetime(2024, 1, 1, tzinfo=UTC)
DEFINITIONS = {t: JobDefinition(job_type=t) for t in ("a", "b", "loop")}


class EnqueueNext(Policy):
    """On ``job_enqueued`` of type ``source``, enqueue one job of type ``target``."""

    name = "enqueue_next"

    def __init__(self, source: str, target: str) -> None:
        self.source, self.target = source, target

    def needs(self, trigger: Trigger) -> Needs | None:
        if not isinstance(trigger.event, JobEnqueued) or trigger.state.job_type != self.source:
            return None
        return Needs(jobs=(follow_up_id(self, trigger),), job_types=(self.target,))

    def react(self, trigger: Trigger, facts: Facts) -> list[JobEvents]:
        job_id = follow_up_id(self, trigger)
        if job_id in facts.jobs:
            return []
        request = EnqueueRequest(job_type=self.target)
        definition = facts.definitions.get(self.target)
        return [(job_id, [decide.decide_enqueue(job_id, request, definition, facts.now)])]


class CancelOnEnqueue(Policy):
    """On any ``job_enqueued``, cancel one fixed job (``reason`` tells two instances apart)."""

    name = "cancel_on_enqueue"

    def __init__(self, victim: UUID, reason: str = "cascade") -> None:
        self.victim, self.reason = victim, reason

    def needs(self, trigger: Trigger) -> Needs | None:
        return Needs(jobs=(self.victim,)) if isinstance(trigger.event, JobEnqueued) else None

    def react(self, trigger: Trigger, facts: Facts) -> list[JobEvents]:
        state = facts.jobs[self.victim]
        return [(self.victim, [decide.decide_cancel(state, facts.now, self.reason)])]


class World:
    """An in-memory unit of work: states by id, the reads the cascade asked for, and the
    triggers every fold made."""

    def __init__(self, *states: JobState) -> None:
        self.jobs = {state.job_id: state for state in states}
        self.reads: list[tuple[set[UUID], set[str]]] = []
        self.folded: list[JobEvents] = []

    def read(
        self, job_ids: set[UUID], job_types: set[str]
    ) -> tuple[Mapping[UUID, JobState], Mapping[str, JobDefinition]]:
        self.reads.append((job_ids, job_types))
        jobs = {i: self.jobs[i] for i in job_ids if i in self.jobs}
        return jobs, {t: DEFINITIONS[t] for t in job_types if t in DEFINITIONS}

    def fold(self, changes: Sequence[JobEvents]) -> list[Trigger]:
        triggers = []
        for job_id, events in changes:
            self.folded.append((job_id, events))
            for event in events:
                state = self.jobs[job_id] = evolve(self.jobs.get(job_id), event)
                triggers.append(Trigger(job_id, event, state))
        return triggers


def enqueued(world: World, job_type: str, at: datetime = T0) -> Trigger:
    """Enqueue a job of ``job_type`` into ``world``; its trigger."""
    job_id = uuid4()
    event = decide.decide_enqueue(
        job_id, EnqueueRequest(job_type=job_type), DEFINITIONS[job_type], at
    )
    [trigger] = world.fold([(job_id, [event])])
    return trigger


def test_only_policies_the_event_concerns_are_asked() -> None:
    """``ask`` keeps the (trigger, policy) pairs whose ``needs`` is not ``None``, in trigger
    order then policy order."""
    world = World()
    a, b = enqueued(world, "a"), enqueued(world, "b")
    on_a, on_b = EnqueueNext("a", "b"), EnqueueNext("b", "a")
    asked = ask([on_b, on_a], [a, b])
    assert [(item.policy, item.trigger) for item in asked] == [(on_a, a), (on_b, b)]
    assert ask([on_a], [b]) == []


def test_follow_up_ids_are_derived_from_their_cause() -> None:
    """The same policy, trigger and index give the same id; another index, another
    version of the trigger job or another policy give another."""
    world = World()
    trigger = enqueued(world, "a")
    policy = EnqueueNext("a", "b")
    assert follow_up_id(policy, trigger) == follow_up_id(policy, trigger, 0)
    later = trigger._replace(state=msgspec.structs.replace(trigger.state, version=2))
    others = {
        follow_up_id(policy, trigger, 1),
        follow_up_id(policy, later),
        follow_up_id(CancelOnEnqueue(uuid4()), trigger),
    }
    assert follow_up_id(policy, trigger) not in others and len(others) == 3


def test_follow_ups_are_stamped_with_the_trigger_time() -> None:
    """A policy decides with ``now`` = its trigger event's time, not any clock."""
    world = World()
    trigger = enqueued(world, "a", at=T0 + timedelta(hours=3))
    [(job_id, [event])] = react(ask([EnqueueNext("a", "b")], [trigger]), {}, DEFINITIONS)
    assert isinstance(event, JobEnqueued) and event.at == T0 + timedelta(hours=3)
    assert event.job_id == job_id and event.request.job_type == "b"


def test_reactions_to_one_job_compose_within_a_round() -> None:
    """The second policy reacting in a round sees the first one's follow-up folded in: two
    cancels of one job, the second refused as the job is no longer live."""
    world = World()
    victim = enqueued(world, "b").state
    trigger = enqueued(world, "a")
    asked = ask(
        [CancelOnEnqueue(victim.job_id), CancelOnEnqueue(victim.job_id, "again")], [trigger]
    )
    with pytest.raises(InvalidTransitionError, match="only live jobs cancel"):
        react(asked, {victim.job_id: victim}, DEFINITIONS)


def test_a_cascade_runs_follow_ups_of_follow_ups_until_quiet() -> None:
    """a → b → loop → (nothing for loop): two rounds of follow-ups; each round reads what
    its reacting policies need, once."""
    world = World()
    trigger = enqueued(world, "a")
    a_to_b, b_to_loop = EnqueueNext("a", "b"), EnqueueNext("b", "loop")
    rounds = cascade([a_to_b, b_to_loop], [trigger], world.read, world.fold)
    assert rounds == 2
    assert [world.jobs[job_id].job_type for job_id, _ in world.folded] == ["a", "b", "loop"]
    b_trigger = Trigger(world.folded[1][0], world.folded[1][1][0], world.jobs[world.folded[1][0]])
    assert world.reads == [
        ({follow_up_id(a_to_b, trigger)}, {"b"}),
        ({follow_up_id(b_to_loop, b_trigger)}, {"loop"}),
    ]


def test_a_follow_up_decision_that_fails_raises_out_of_the_cascade() -> None:
    """A decision error (here: enqueue of an undefined type) is raised, not swallowed, so the
    store rolls the trigger back with it; nothing of that round is folded."""
    world = World()
    trigger = enqueued(world, "a")
    with pytest.raises(LedgerError, match="not defined"):
        cascade([EnqueueNext("a", "undefined")], [trigger], world.read, world.fold)
    assert len(world.folded) == 1


def test_a_cascade_that_never_ends_is_stopped_at_the_depth_bound() -> None:
    """A cycle (every ``loop`` job enqueues another) raises the typed error once
    ``max_depth`` rounds have been folded, without folding the next."""
    world = World()
    trigger = enqueued(world, "loop")
    with pytest.raises(PolicyCascadeError, match="after 3 rounds") as raised:
        cascade([EnqueueNext("loop", "loop")], [trigger], world.read, world.fold, max_depth=3)
    assert raised.value.code == "policy.cascade_too_deep"
    assert len(world.folded) == 1 + 3


def test_no_policy_interested_means_no_read_and_no_round() -> None:
    """When no policy needs anything for the triggers, nothing is read or folded."""
    world = World()
    trigger = enqueued(world, "b")
    assert cascade([EnqueueNext("a", "b")], [trigger], world.read, world.fold) == 0
    assert world.reads == [] and len(world.folded) == 1


def test_a_policy_that_finds_its_follow_up_done_adds_nothing() -> None:
    """Needing the follow-up's own id lets a policy see it already exists and stay quiet."""
    world = World()
    trigger = enqueued(world, "a")
    policy = EnqueueNext("a", "b")
    existing = follow_up_id(policy, trigger)
    request = EnqueueRequest(job_type="b")
    world.fold([(existing, [decide.decide_enqueue(existing, request, DEFINITIONS["b"], T0)])])
    assert cascade([policy], [trigger], world.read, world.fold) == 0
    assert len(world.folded) == 2
