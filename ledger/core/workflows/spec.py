"""What a caller asks for: a workflow run request, its steps and their dependencies, and the
step defaults resolved from the job definitions at submit.

A request is kept verbatim (type-checked and normalised) in the run's first event, next to
its resolution, as a job's :class:`~ledger.core.events.EnqueueRequest` is: an idempotent
repeat is compared with what was *asked* (:func:`canonical`), never with what defaults
resolved it to.
"""

from __future__ import annotations

from enum import StrEnum

import msgspec

from ledger.core.values import JSON, BackoffPolicy


class ReleaseMode(StrEnum):
    """When a dependency lets its dependent run."""

    ON_SUCCESS = "on_success"
    """Only once the prerequisite succeeded; a prerequisite that fails or is cancelled
    cancels the dependent as unsatisfied (``workflow.dependency_unsatisfied``)."""
    ON_TERMINAL = "on_terminal"
    """Once the prerequisite ended, whatever the outcome."""


class StepKind(StrEnum):
    """A job step runs a job; an external step is completed from outside (an approval)."""

    JOB = "job"
    EXTERNAL = "external"


class _Spec(msgspec.Struct, frozen=True, kw_only=True):
    """Base of the immutable values of a spec."""


class Dependency(_Spec, frozen=True):
    """One edge: the step waits for ``step`` (its prerequisite), released per ``mode``."""

    step: str
    mode: ReleaseMode = ReleaseMode.ON_SUCCESS


class JobStep(_Spec, frozen=True, tag="job", tag_field="kind"):
    """A step that runs one job. Unset fields take the job type's defaults at submit.

    ``stage`` is the step's label in views and graphs (``extract``, ``load``); it is not
    passed to the job, whose stage is its own."""

    key: str
    job_type: str
    payload: dict[str, JSON] = {}
    priority: int | None = None
    max_attempts: int | None = None
    timeout_s: float | None = None
    stage: str | None = None
    queue: str | None = None
    depends_on: tuple[Dependency, ...] = ()


class ExternalStep(_Spec, frozen=True, tag="external", tag_field="kind"):
    """A step with no job: it waits for an outside ``complete`` once its prerequisites let it."""

    key: str
    stage: str | None = None
    depends_on: tuple[Dependency, ...] = ()


StepRequest = JobStep | ExternalStep
"""One step as asked (the ``kind`` field tells which, in JSON)."""


def kind_of(step: StepRequest) -> StepKind:
    return StepKind.JOB if isinstance(step, JobStep) else StepKind.EXTERNAL


class WorkflowRequest(_Spec, frozen=True):
    """A run as asked. ``result_step`` names the step whose output is the run's result."""

    workflow_type: str
    steps: tuple[StepRequest, ...]
    org: str | None = None
    idempotency_key: str | None = None
    metadata: dict[str, JSON] = {}
    result_step: str | None = None


class StepResolution(_Spec, frozen=True):
    """A job step's settings resolved at submit from its job type's definition, and frozen:
    its job, released later, runs with these even if the definition has changed since."""

    key: str
    definition_version: int
    priority: int
    max_attempts: int
    timeout_s: float
    backoff: BackoffPolicy


def canonical(value: WorkflowRequest | tuple[StepRequest, ...]) -> bytes:
    """A request's (or an append's steps') canonical JSON, object keys sorted: equal bytes,
    same request. ``1`` is not ``1.0``, as for jobs."""
    return msgspec.json.encode(msgspec.to_builtins(value), order="sorted")


def same_request(existing: WorkflowRequest, request: WorkflowRequest) -> bool:
    """Whether ``request`` repeats ``existing`` field for field, as asked."""
    return canonical(existing) == canonical(request)
