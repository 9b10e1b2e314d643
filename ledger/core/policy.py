"""Policies: pure rules by which an appended job event causes follow-up job events in the
same unit of work (what workflows need: a step's job is released by the policy that sees its
last prerequisite end — no poller, no second transaction).

A :class:`Policy` is asked about every job event a unit of work appends, with the job's state
after it (a :class:`Trigger`). It answers in two steps, so that the store knows what to read
(and lock) before the policy decides:

1. :meth:`Policy.needs` — ``None`` when the event is none of its business (the common case:
   keep it cheap), else the jobs and job types it must see (:class:`Needs`);
2. :meth:`Policy.react` — given those jobs' current states (this unit's changes included)
   and definitions (:class:`Facts`), the follow-up changes: events decided by the pure
   decisions of :mod:`ledger.core.decide` for existing jobs, or new jobs' ``job_enqueued``.

``now`` is the trigger event's own time: a follow-up happens at the instant of its cause, so
the history says when and why, and re-running a policy over the history gives the same
events. New jobs get ids derived from their cause (:func:`follow_up_id`), for the same reason.

:func:`cascade` runs rounds: the follow-ups' own events are triggers of the next round, up to
:data:`MAX_CASCADE_DEPTH` rounds; a cascade still going then (a cycle, most likely) raises
:class:`PolicyCascadeError`, and the store rolls the whole unit of work back. A decision that
raises (an illegal transition, an undefined job type) rolls it back too: the trigger and its
follow-ups commit together or not at all.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import ClassVar, NamedTuple, Protocol
from uuid import UUID, uuid5

from ledger.core.errors import LedgerError
from ledger.core.events import JobEvent
from ledger.core.state import JobState, evolve
from ledger.core.values import JobDefinition
from ledger.core.workflows.events import WorkflowEvent
from ledger.core.workflows.state import RunState, StepsNotLoadedError
from ledger.core.workflows.state import evolve as evolve_run

MAX_CASCADE_DEPTH = 8
"""Rounds of follow-ups of follow-ups one append may cause."""

FOLLOW_UP_NAMESPACE = UUID("0b7f5e8a-3c2d-4e61-9a7b-5d1c8e2f4a90")

JobEvents = tuple[UUID, Sequence[JobEvent]]
"""One job's new events, as ``UnitOfWork.append`` takes them."""


class RunEvents(NamedTuple):
    """One workflow run's new events (a policy's change to a run's stream)."""

    run_id: UUID
    events: Sequence[WorkflowEvent]


Reaction = JobEvents | RunEvents
"""One item of a policy's reaction: new events for a job's stream or a run's (a kind of state's
change, :class:`ledger.views.kind.Change`, is the store's general form; the core knows only these
two kinds)."""


class PolicyCascadeError(LedgerError):
    """Policies kept causing follow-ups past the depth bound (a cycle, most likely); nothing
    of the unit of work was committed."""

    code = "policy.cascade_too_deep"


class Trigger(NamedTuple):
    """An appended job event and the job's state right after it."""

    job_id: UUID
    event: JobEvent
    state: JobState


class Needs(NamedTuple):
    """What a policy must see before it decides: jobs (read and locked; absent ones are
    simply missing from :attr:`Facts.jobs`), job types' definitions (to enqueue), and
    workflow runs (locked by their release lock, then read: ``steps`` names the steps of
    those runs the decision looks at first, so a store may load only those)."""

    jobs: tuple[UUID, ...] = ()
    job_types: tuple[str, ...] = ()
    runs: tuple[UUID, ...] = ()
    steps: tuple[tuple[UUID, str], ...] = ()


class Facts(NamedTuple):
    """What a policy decides on."""

    jobs: Mapping[UUID, JobState]
    """The current state of each needed job that exists (at least those)."""
    definitions: Mapping[str, JobDefinition]
    """The definition of each needed job type that exists."""
    now: datetime
    """The trigger event's time: the follow-ups' timestamp."""
    runs: Mapping[UUID, RunState] = {}
    """The current state of each needed run that exists (maybe loaded in part)."""


class Policy(ABC):
    """A rule from a job event to follow-up job changes (pure: no I/O, no clock)."""

    name: ClassVar[str]
    """A stable name: part of the ids of the jobs it enqueues."""
    events: ClassVar[tuple[type[JobEvent], ...] | None] = None
    """The job events it may react to (``None``: any). A store builds no trigger for an
    event no policy names, so a policy of a few event types costs the others nothing."""

    @abstractmethod
    def needs(self, trigger: Trigger) -> Needs | None:
        """``None`` if ``trigger`` is none of this policy's business, else what it must see."""

    @abstractmethod
    def react(self, trigger: Trigger, facts: Facts) -> Sequence[Reaction]:
        """The follow-up changes ``trigger`` causes (may be none). A decision on a run
        loaded in part may raise StepsNotLoadedError: the cascade loads more and asks again."""


def trigger_types(policies: Sequence[Policy]) -> tuple[type[JobEvent], ...] | None:
    """The job event types some policy may react to (``None``: any event)."""
    found: list[type[JobEvent]] = []
    for policy in policies:
        if policy.events is None:
            return None
        found += [cls for cls in policy.events if cls not in found]
    return tuple(found)


def follow_up_id(policy: Policy, trigger: Trigger, n: int = 0) -> UUID:
    """The id of the ``n``-th job ``policy`` enqueues in reaction to ``trigger``: the same
    for the same cause, so a policy can tell (by needing it) whether it already exists."""
    cause = f"{policy.name}:{trigger.job_id}:{trigger.state.version}:{n}"
    return uuid5(FOLLOW_UP_NAMESPACE, cause)


class Asked(NamedTuple):
    """A policy that wants to react to a trigger, and what it needs for that."""

    policy: Policy
    trigger: Trigger
    needs: Needs


def ask(policies: Sequence[Policy], triggers: Sequence[Trigger]) -> list[Asked]:
    """Which policies react to which triggers, in trigger order, then policy order."""
    asked = []
    for trigger in triggers:
        for policy in policies:
            needs = policy.needs(trigger)
            if needs is not None:
                asked.append(Asked(policy, trigger, needs))
    return asked


def react(
    asked: Sequence[Asked],
    jobs: Mapping[UUID, JobState],
    definitions: Mapping[str, JobDefinition],
    runs: Mapping[UUID, RunState] | None = None,
) -> list[Reaction]:
    """Every asked policy's follow-ups, in order. Each decides on the states left by the
    ones before it (their follow-ups folded in), so two reactions to one job (or run)
    compose."""
    current = dict(jobs)
    current_runs = dict(runs or {})
    changes: list[Reaction] = []
    for policy, trigger, _ in asked:
        facts = Facts(current, definitions, trigger.event.at, current_runs)
        for change in policy.react(trigger, facts):
            if isinstance(change, RunEvents):
                run = current_runs.get(change.run_id)
                for run_event in change.events:
                    run = evolve_run(run, run_event)
                if run is not None:
                    current_runs[change.run_id] = run
                changes.append(change)
                continue
            job_id, events = change
            state = current.get(job_id)
            for event in events:
                state = evolve(state, event)
            if state is not None:
                current[job_id] = state
            changes.append((job_id, events))
    return changes


Read = Callable[[set[UUID], set[str]], tuple[Mapping[UUID, JobState], Mapping[str, JobDefinition]]]
"""``read(job_ids, job_types)``: the current states and definitions of those that exist."""
Fold = Callable[[list[Reaction]], Sequence[Trigger]]
"""``fold(changes)``: append them to the unit of work; the triggers their events make."""


class RunReads(Protocol):
    """How the cascade reads runs (the store's, under their release locks)."""

    def runs(self, wanted: Mapping[UUID, set[str]]) -> Mapping[UUID, RunState]:
        """The current state of each wanted run that exists, with at least the named
        steps (and what their decisions usually read) loaded."""

    def more(self, missing: StepsNotLoadedError) -> RunState:
        """The run ``missing`` names, with the steps it asked for loaded too."""


MAX_LOADS = 64
"""Loads of more steps one round may ask for before the cascade calls it a bug."""


def cascade(
    policies: Sequence[Policy],
    triggers: Sequence[Trigger],
    read: Read,
    fold: Fold,
    *,
    runs: RunReads | None = None,
    max_depth: int = MAX_CASCADE_DEPTH,
) -> int:
    """Run the policies over ``triggers``, fold their follow-ups, and again over those, until
    no policy reacts. Returns the number of rounds that produced follow-ups; raises
    :class:`PolicyCascadeError` before folding a round past ``max_depth``.

    Jobs are read (and locked) before runs, so a unit of work holds its jobs' rows before it
    waits for a run's release lock, as every writer does."""
    rounds = 0
    while triggers:
        asked = ask(policies, triggers)
        if not asked:
            break
        job_ids = {job_id for item in asked for job_id in item.needs.jobs}
        job_types = {job_type for item in asked for job_type in item.needs.job_types}
        jobs, definitions = read(job_ids, job_types)
        wanted: dict[UUID, set[str]] = {}
        for item in asked:
            for run_id in item.needs.runs:
                wanted.setdefault(run_id, set())
            for run_id, step_key in item.needs.steps:
                wanted.setdefault(run_id, set()).add(step_key)
        states: dict[UUID, RunState] = {}
        if wanted:
            if runs is None:
                raise TypeError("a policy needs runs, and this cascade reads none")
            states = dict(runs.runs(wanted))
        for _ in range(MAX_LOADS):
            try:
                reacted = react(asked, jobs, definitions, states)
                break
            except StepsNotLoadedError as missing:
                assert runs is not None  # only a run loaded in part raises it
                states[missing.run_id] = runs.more(missing)
        else:
            raise PolicyCascadeError(f"policies kept asking for more steps ({MAX_LOADS} loads)")
        changes = [change for change in reacted if change[1]]
        if not changes:
            break
        if rounds == max_depth:
            names = sorted({item.policy.name for item in asked})
            raise PolicyCascadeError(
                f"policies {', '.join(names)} still cause follow-ups after {max_depth} rounds "
                "(a cycle?); nothing was committed"
            )
        rounds += 1
        triggers = fold(changes)
    return rounds
