"""The workflow policy: a step's job ended, so its run records the end and releases (or
cancels) the dependents, in the same unit of work as the job's event.

:meth:`WorkflowPolicy.needs` answers from the trigger alone: ``None`` unless the job has a
workflow link (its ``job_enqueued`` v2) *and* the event ends it or requeues it
(:func:`~ledger.core.workflows.jobs.step_outcome`). A claim, heartbeat, stage, progress,
failure, retry or hand-back of a step's job is ``None`` as for a plain job: it reads,
locks and appends nothing of the run. Otherwise it needs the run, and names the step, so
the store can load that step, its dependents and their prerequisites rather than the run.
"""

from __future__ import annotations

from collections.abc import Sequence

from ledger.core.events import JobCancelled, JobDeadLettered, JobRequeued, JobSucceeded
from ledger.core.policy import Facts, Needs, Policy, Reaction, RunEvents, Trigger
from ledger.core.workflows.decide import decide_job_event
from ledger.core.workflows.errors import WorkflowTransitionError
from ledger.core.workflows.jobs import step_outcome


class WorkflowPolicy(Policy):
    """Mirror the end of a step's job on its run (see the module docstring)."""

    name = "workflows"
    events = (JobSucceeded, JobDeadLettered, JobCancelled, JobRequeued)
    """What :func:`~ledger.core.workflows.jobs.step_outcome` reads as an end or a requeue."""

    def needs(self, trigger: Trigger) -> Needs | None:
        link = trigger.state.workflow
        if link is None or step_outcome(trigger.event, trigger.state) is None:
            return None
        return Needs(runs=(link.run_id,), steps=((link.run_id, link.step_key),))

    def react(self, trigger: Trigger, facts: Facts) -> Sequence[Reaction]:
        link = trigger.state.workflow
        assert link is not None  # needs() said so
        run = facts.runs.get(link.run_id)
        if run is None:
            raise WorkflowTransitionError(
                f"job {trigger.job_id} runs step {link.step_key!r} of run {link.run_id}, "
                "which does not exist"
            )
        decision = decide_job_event(
            run, link.step_key, trigger.job_id, trigger.event, trigger.state
        )
        changes: list[Reaction] = []
        if decision.events:
            changes.append(RunEvents(link.run_id, decision.events))
        changes += [(job.job_id, [job.enqueued]) for job in decision.enqueue]
        return changes
