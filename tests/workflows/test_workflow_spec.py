"""A workflow request's validation, its resolution from the job definitions, its canonical
form, and the codec's round trip of every workflow event."""

from __future__ import annotations

from pathlib import Path
from uuid import uuid4

import msgspec
import pytest
from exchange_files import seal
from workflow_helpers import DEFINITIONS, T0, Driver, ext, job, request

from ledger.core.codec import DEFAULT_CODEC, topic_of
from ledger.core.exchange import (
    ImportBadLineError,
    StreamKind,
    event_line,
    header_line,
    stored_fields,
)
from ledger.core.exchange_reader import read_streams
from ledger.core.values import JobDefinition
from ledger.core.workflows import validation
from ledger.core.workflows.decide import check_repeat, decide_submit
from ledger.core.workflows.errors import (
    DependencyCycleError,
    InvalidWorkflowSpecError,
    WorkflowDefinitionNotFoundError,
    WorkflowIdempotencyConflictError,
)
from ledger.core.workflows.events import WORKFLOW_EVENTS, WorkflowStepReleased
from ledger.core.workflows.ids import step_job_id
from ledger.core.workflows.spec import (
    Dependency,
    JobStep,
    WorkflowRequest,
    canonical,
    same_request,
)
from ledger.core.workflows.validation import MAX_STEPS, validate_request
from ledger.store.streams import job_type_stream_id


def refusal(req: WorkflowRequest) -> str:
    with pytest.raises(InvalidWorkflowSpecError) as caught:
        validate_request(req, DEFINITIONS)
    assert caught.value.code.startswith("workflow.")
    return caught.value.message


@pytest.mark.parametrize(
    ("req", "says"),
    [
        (request(job("a"), workflow_type="  "), "workflow_type must be a non-empty string"),
        (request(job(" ")), "step key must be a non-empty string"),
        (request(job("a", job_type="")), "step 'a' job_type must be a non-empty string"),
        (request(job("a"), job("a")), "step 'a' is given twice"),
        (request(job("a", "a")), "step 'a' depends on itself"),
        (request(job("a"), job("b", "a", "a")), "step 'b' names 'a' twice"),
        (request(job("b", "nope")), "step 'b' depends on unknown 'nope'"),
        (request(), "a workflow needs at least one step"),
        (request(job("a", max_attempts=0)), "step 'a' max_attempts must be >= 1"),
        (request(job("a", max_attempts=-2)), "step 'a' max_attempts must be >= 1"),
        (request(job("a", timeout_s=0.0)), "step 'a' timeout_s must be a number of seconds > 0"),
        (request(job("a", timeout_s=-1.0)), "step 'a' timeout_s must be a number of seconds > 0"),
        (request(job("a"), result_step="z"), "result_step 'z' is not a step"),
        (request(job("a"), idempotency_key=""), "idempotency_key must be a non-empty string"),
        (request(job("a", priority=2**31)), "step 'a' priority must fit in 32 bits"),
        (request(job("a", stage=" ")), "step 'a' stage must be a non-empty string"),
        (request(job("a", queue="")), "step 'a' queue must be a non-empty string"),
        (request(job("a"), org=""), "org must be a non-empty string"),
        (request(job("a", payload={"x": "\x00"})), "step 'a' payload"),
    ],
)
def test_a_malformed_request_is_refused_with_a_message_naming_what_is_wrong(
    req: WorkflowRequest, says: str
) -> None:
    """Blank names, duplicate steps, bad dependencies, no steps, non-positive attempts or
    timeouts and an unknown result step are refused as workflow.invalid_spec."""
    assert says in refusal(req)


def test_a_cycle_is_refused_naming_the_cycle_in_run_order() -> None:
    """a -> b -> c -> a (each runs before the next) is named, with its own code."""
    req = request(job("a", "c"), job("b", "a"), job("c", "b"), job("d"))
    with pytest.raises(DependencyCycleError) as caught:
        validate_request(req, DEFINITIONS)
    assert caught.value.code == "workflow.dependency_cycle"
    assert (
        str(caught.value)
        == "workflow.dependency_cycle: dependencies form a cycle: a -> b -> c -> a"
    )
    assert caught.value.cycle == ["a", "b", "c", "a"]


def test_a_cycle_behind_a_dag_part_is_found_and_only_the_cycle_is_named() -> None:
    """Steps leading into the cycle are not part of the message."""
    req = request(job("root"), job("x", "root", "z"), job("y", "x"), job("z", "y"))
    with pytest.raises(DependencyCycleError) as caught:
        validate_request(req, DEFINITIONS)
    assert caught.value.cycle == ["x", "y", "z", "x"]


def test_a_long_chain_validates_without_recursion() -> None:
    """A chain of MAX_STEPS steps is fine (the cycle search is iterative)."""
    steps = [job("s0")] + [job(f"s{i}", f"s{i - 1}") for i in range(1, MAX_STEPS)]
    validated, _ = validate_request(request(*steps), DEFINITIONS)
    assert len(validated.steps) == MAX_STEPS
    with pytest.raises(InvalidWorkflowSpecError, match="at most"):
        validate_request(request(*steps, job("extra")), DEFINITIONS)


@pytest.mark.parametrize(("job_type", "state"), [("off", "disabled"), ("missing", "not defined")])
def test_a_job_step_of_a_missing_or_disabled_type_is_refused_naming_the_step(
    job_type: str, state: str
) -> None:
    """workflow.definition_not_found_or_disabled, as the seed names it."""
    with pytest.raises(WorkflowDefinitionNotFoundError) as caught:
        validate_request(request(job("a"), job("b", job_type=job_type)), DEFINITIONS)
    assert caught.value.code == "workflow.definition_not_found_or_disabled"
    assert caught.value.message == f"step 'b': job type {job_type!r} is {state}"


def test_wrongly_typed_fields_are_refused_before_anything_is_stored() -> None:
    """msgspec checks types only when decoding; a request is type-checked first."""
    bad = JobStep(key="a", job_type="work", max_attempts="3")  # type: ignore[arg-type]
    assert "Expected `int | null`" in refusal(request(bad))
    assert "not JSON" in refusal(request(job("a", payload={"x": object()})))


def test_step_defaults_are_resolved_from_the_definitions_and_frozen() -> None:
    """Unset priority/attempts/timeout take the type's defaults; set ones are kept; both
    are frozen in the submitted event."""
    req = request(job("a"), job("b", priority=5, max_attempts=1, timeout_s=2.5), ext("gate"))
    _, resolutions = validate_request(req, DEFINITIONS)
    by_key = {r.key: r for r in resolutions}
    assert set(by_key) == {"a", "b"}
    work = DEFINITIONS["work"]
    assert (by_key["a"].priority, by_key["a"].max_attempts, by_key["a"].timeout_s) == (
        work.default_priority,
        work.max_attempts,
        work.default_timeout_s,
    )
    assert (by_key["b"].priority, by_key["b"].max_attempts, by_key["b"].timeout_s) == (5, 1, 2.5)
    # Later definition changes do not reach the run: its release reads the frozen values.
    run = Driver(req)
    job_a = run.job_of("a")
    assert (job_a.max_attempts, job_a.timeout_s, job_a.definition_version) == (3, 60.0, 1)


def test_the_same_request_is_the_same_run_and_another_is_a_conflict() -> None:
    """Canonical compare: key order in payloads does not matter, a value does."""
    first = request(job("a", payload={"x": 1, "y": [1, 2]}), idempotency_key="k")
    decision = decide_submit(uuid4(), first, DEFINITIONS, T0)
    same = request(job("a", payload={"y": (1, 2), "x": 1}), idempotency_key="k")
    check_repeat(decision.state, same)
    assert same_request(decision.state.request, validate_request(same, DEFINITIONS)[0])
    other = request(job("a", payload={"x": 2, "y": [1, 2]}), idempotency_key="k")
    with pytest.raises(WorkflowIdempotencyConflictError) as caught:
        check_repeat(decision.state, other)
    assert caught.value.code == "workflow.idempotency_conflict"
    assert canonical(first) != canonical(other)


def test_a_request_decodes_from_json_with_step_kinds_and_default_modes() -> None:
    """The declarative form: JSON with ``kind`` per step; a dependency defaults to on_success."""
    text = b"""{"workflow_type": "etl", "result_step": "load", "steps": [
        {"kind": "job", "key": "extract", "job_type": "work"},
        {"kind": "external", "key": "approve", "depends_on": [{"step": "extract"}]},
        {"kind": "job", "key": "load", "job_type": "work",
         "depends_on": [{"step": "approve", "mode": "on_terminal"}]}]}"""
    req = msgspec.json.decode(text, type=WorkflowRequest)
    validated, _ = validate_request(req, DEFINITIONS)
    assert [type(s).__name__ for s in validated.steps] == ["JobStep", "ExternalStep", "JobStep"]
    assert validated.steps[1].depends_on == (Dependency(step="extract"),)
    assert validated.steps[2].depends_on[0].mode == "on_terminal"


def test_every_workflow_event_has_a_stable_topic_and_round_trips() -> None:
    """Each workflow event is registered in the default codec as '<name>.v<version>', and
    every event a run's decisions produce decodes to itself."""
    for cls in WORKFLOW_EVENTS:
        assert cls.name.startswith("workflow_") and cls.name.islower()
        assert topic_of(cls) == f"{cls.name}.v1"
    run = Driver(request(job("a"), ext("gate", "a"), job("b", "gate"), result_step="b"))
    run.succeed("a", {"rows": 3})
    run.complete("gate", output={"by": "ann"}, reason="looks fine")
    run.append("more", job("c", "b:t"))
    run.fail("b")
    run.cancel("enough")
    names = set()
    for event in run.history:
        topic, state = DEFAULT_CODEC.encode(event)
        assert DEFAULT_CODEC.decode(topic, state) == event
        names.add(event.name)
    assert len(names) >= 8


def test_a_job_definition_of_any_version_resolves_its_version_into_the_step() -> None:
    """The resolution records which definition version the step's job will run under."""
    definitions = {"work": JobDefinition(job_type="work", version=4)}
    _, resolutions = validate_request(request(job("a")), definitions)
    assert resolutions[0].definition_version == 4


def test_the_json_spec_of_docs_workflows_md_is_a_valid_request() -> None:
    """The page's JSON example decodes and validates (with its job types defined)."""
    page = (Path(__file__).resolve().parents[2] / "docs" / "workflows.md").read_text()
    text = page.split("```json\n", 1)[1].split("```", 1)[0]
    req = msgspec.json.decode(text, type=WorkflowRequest)
    definitions = {t: JobDefinition(job_type=t) for t in ("extract", "load", "cleanup")}
    validated, resolutions = validate_request(req, definitions)
    assert [s.key for s in validated.steps][-1] == "cleanup"
    assert [r.key for r in resolutions] == ["extract-a", "extract-b", "load", "cleanup"]


@pytest.mark.parametrize("kind", [StreamKind.JOB, StreamKind.JOB_TYPE])
def test_a_workflow_event_in_a_job_or_job_type_line_is_refused(kind: StreamKind) -> None:
    """Runs are exchanged as streams of their own kind: a workflow event in a line that claims
    another kind is a line error."""
    event = Driver(request(job("a"))).history[0]
    topic, state = DEFAULT_CODEC.encode(event)
    line = event_line(uuid4(), kind, 1, topic, stored_fields(DEFAULT_CODEC, topic, state))
    with pytest.raises(
        ImportBadLineError,
        match=rf"line 2: workflow_submitted\.v1 is not an event of a {kind} stream",
    ):
        list(read_streams([header_line(), line], DEFAULT_CODEC, job_type_stream_id))


def test_a_run_stream_is_read_whole_and_folded() -> None:
    """A run's stream of the ``workflow`` kind is read as one stream, named by its type and
    checked by the run's fold: a release of a step still blocked is a line error."""
    driver = Driver(request(job("a"), job("b", "a")))
    run_id = driver.state.run_id
    lines = [header_line()]
    for version, event in enumerate(driver.history, start=1):
        topic, state = DEFAULT_CODEC.encode(event)
        fields = stored_fields(DEFAULT_CODEC, topic, state)
        lines.append(event_line(run_id, StreamKind.WORKFLOW, version, topic, fields))
    [stream] = read_streams(_sealed(lines), DEFAULT_CODEC, job_type_stream_id)
    assert (stream.kind, stream.stream_id, len(stream.records)) == (
        StreamKind.WORKFLOW,
        run_id,
        len(driver.history),
    )
    early = WorkflowStepReleased(
        at=driver.history[0].at, step_key="b", job_id=step_job_id(run_id, "b")
    )
    topic, state = DEFAULT_CODEC.encode(early)
    bad = event_line(
        run_id, StreamKind.WORKFLOW, len(lines), topic, stored_fields(DEFAULT_CODEC, topic, state)
    )
    with pytest.raises(ImportBadLineError, match=rf"line {len(lines) + 1}: "):
        list(read_streams(_sealed([*lines, bad]), DEFAULT_CODEC, job_type_stream_id))


def _sealed(lines: list[bytes]) -> list[bytes]:
    """``lines`` (a header, then events) ending in the trailer that states them, as every
    export does since format 2."""
    return seal(lines[0], lines[1:]).splitlines(keepends=True)


def test_a_request_or_append_larger_than_the_spec_bound_is_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The whole spec is stored in one event, so it is bounded as a whole too."""
    monkeypatch.setattr(validation, "MAX_SPEC_BYTES", 400)
    small = request(job("a"))
    validate_request(small, DEFINITIONS)
    big = request(job("a", payload={"text": "x" * 300}))
    assert "workflow steps is" in refusal(big)
    assert "the limit is 400" in refusal(request(job("a"), metadata={"m": "y" * 300}))
