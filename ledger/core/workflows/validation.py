"""A run request (or an append) checked before anything is written, and its job steps'
defaults resolved from the job definitions.

Every refusal is an :class:`~ledger.core.workflows.errors.InvalidWorkflowSpecError` (a cycle:
its subclass :class:`DependencyCycleError`, naming the cycle), except a job step whose type
is missing or disabled (:class:`WorkflowDefinitionNotFoundError`), which is checked last: a
request that is wrong in itself says so whatever the definitions are.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TypeVar

import msgspec

from ledger.core.errors import InvalidRequestError
from ledger.core.limits import MAX_JSON_BYTES, check_json, check_name, check_seconds
from ledger.core.requests import INT32, MAX_PAYLOAD_BYTES, typed
from ledger.core.values import JobDefinition
from ledger.core.workflows.errors import (
    DependencyCycleError,
    InvalidWorkflowSpecError,
    WorkflowDefinitionNotFoundError,
)
from ledger.core.workflows.graph import find_cycle
from ledger.core.workflows.spec import (
    ExternalStep,
    JobStep,
    StepRequest,
    StepResolution,
    WorkflowRequest,
)

T = TypeVar("T")

MAX_STEPS = 10_000
"""The most steps one run may have (its request and appends together)."""

MAX_SPEC_BYTES = 16 * MAX_JSON_BYTES
"""The largest request (or append) as JSON: it is stored in one event."""


@contextmanager
def _as_spec_error() -> Iterator[None]:
    """The shared field checks raise ``request.invalid``; in a spec they are spec errors."""
    try:
        yield
    except InvalidRequestError as exc:
        raise InvalidWorkflowSpecError(exc.message) from None


class _Steps(msgspec.Struct, frozen=True):
    steps: tuple[StepRequest, ...]


def _typed(value: T, cls: type[T], what: str) -> T:
    """:func:`ledger.core.requests.typed`, also refusing values msgspec cannot encode."""
    try:
        return typed(value, cls, what)
    except TypeError as exc:
        raise InvalidWorkflowSpecError(f"{what} holds a value that is not JSON: {exc}") from None


def normalise_request(request: WorkflowRequest) -> WorkflowRequest:
    """``request`` type-checked, payloads and metadata as plain JSON values, every name
    checked, and its steps checked as a graph (:func:`check_steps`). Definitions are not
    consulted: see :func:`resolve_steps`."""
    with _as_spec_error():
        request = _typed(request, WorkflowRequest, "workflow request")
        check_name(request.workflow_type, "workflow_type")
        check_name(request.org, "org", optional=True)
        check_name(request.idempotency_key, "idempotency_key", optional=True)
        metadata = msgspec.json.decode(check_json(request.metadata, "metadata"))
    steps = normalise_steps(request.steps, {})
    if request.result_step is not None and request.result_step not in {s.key for s in steps}:
        raise InvalidWorkflowSpecError(f"result_step {request.result_step!r} is not a step")
    request = msgspec.structs.replace(request, steps=steps, metadata=metadata)
    with _as_spec_error():  # each part is bounded already; this bounds the one event
        check_json(msgspec.to_builtins(request), "workflow request", max_bytes=MAX_SPEC_BYTES)
    return request


def normalise_steps(
    steps: Sequence[StepRequest], existing: Mapping[str, Sequence[str]]
) -> tuple[StepRequest, ...]:
    """New steps type-checked and checked as a graph over ``existing`` (each existing step's
    prerequisites; empty at submit): at least one step, unique keys, no self, duplicate or
    unknown dependency, no cycle, positive attempts and timeouts, at most ``MAX_STEPS``, at
    most ``MAX_SPEC_BYTES`` as JSON."""
    with _as_spec_error():
        steps = _typed(_Steps(tuple(steps)), _Steps, "workflow steps").steps
    if not steps:
        raise InvalidWorkflowSpecError("a workflow needs at least one step")
    if len(steps) + len(existing) > MAX_STEPS:
        raise InvalidWorkflowSpecError(f"a workflow has at most {MAX_STEPS} steps")
    prerequisites: dict[str, list[str]] = {key: list(before) for key, before in existing.items()}
    normalised = []
    for step in steps:
        with _as_spec_error():
            check_name(step.key, "step key")
        if step.key in prerequisites:
            raise InvalidWorkflowSpecError(f"step {step.key!r} is given twice")
        prerequisites[step.key] = [dependency.step for dependency in step.depends_on]
        normalised.append(_check_step(step))
    known = set(prerequisites)
    for step in steps:
        seen: set[str] = set()
        for dependency in step.depends_on:
            name = dependency.step
            with _as_spec_error():
                check_name(name, f"a dependency of step {step.key!r}")
            if name == step.key:
                raise InvalidWorkflowSpecError(f"step {step.key!r} depends on itself")
            if name in seen:
                raise InvalidWorkflowSpecError(f"step {step.key!r} names {name!r} twice")
            if name not in known:
                raise InvalidWorkflowSpecError(f"step {step.key!r} depends on unknown {name!r}")
            seen.add(name)
    cycle = find_cycle(prerequisites)
    if cycle is not None:
        raise DependencyCycleError(cycle)
    with _as_spec_error():
        check_json(msgspec.to_builtins(normalised), "workflow steps", max_bytes=MAX_SPEC_BYTES)
    return tuple(normalised)


def _check_step(step: StepRequest) -> StepRequest:
    where = f"step {step.key!r}"
    with _as_spec_error():
        check_name(step.stage, f"{where} stage", optional=True)
        if isinstance(step, ExternalStep):
            return step
        check_name(step.job_type, f"{where} job_type")
        check_name(step.queue, f"{where} queue", optional=True)
        payload = check_json(step.payload, f"{where} payload", max_bytes=MAX_PAYLOAD_BYTES)
        if step.priority is not None and not -INT32 <= step.priority < INT32:
            raise InvalidRequestError(f"{where} priority must fit in 32 bits")
        if step.max_attempts is not None and not 1 <= step.max_attempts < INT32:
            raise InvalidRequestError(f"{where} max_attempts must be >= 1 and fit in 32 bits")
        if step.timeout_s is not None:
            check_seconds(step.timeout_s, f"{where} timeout_s")
    return msgspec.structs.replace(step, payload=msgspec.json.decode(payload))


def resolve_steps(
    steps: Sequence[StepRequest], definitions: Mapping[str, JobDefinition]
) -> tuple[StepResolution, ...]:
    """Each job step's settings: what the step asked, else its job type's defaults. Refuses
    a job step whose type is not defined or is disabled, naming the step."""
    resolved = []
    for step in steps:
        if not isinstance(step, JobStep):
            continue
        definition = definitions.get(step.job_type)
        if definition is None or not definition.enabled:
            state = "disabled" if definition is not None else "not defined"
            raise WorkflowDefinitionNotFoundError(
                f"step {step.key!r}: job type {step.job_type!r} is {state}"
            )
        resolved.append(
            StepResolution(
                key=step.key,
                definition_version=definition.version,
                priority=step.priority
                if step.priority is not None
                else definition.default_priority,
                max_attempts=step.max_attempts or definition.max_attempts,
                timeout_s=step.timeout_s or definition.default_timeout_s,
                backoff=definition.backoff,
            )
        )
    return tuple(resolved)


def validate_request(
    request: WorkflowRequest, definitions: Mapping[str, JobDefinition]
) -> tuple[WorkflowRequest, tuple[StepResolution, ...]]:
    """The normalised request and its job steps' resolutions, or the first refusal."""
    request = normalise_request(request)
    return request, resolve_steps(request.steps, definitions)
