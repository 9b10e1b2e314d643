"""``jobledger workflow``: each command against a real ledger on both backends, its ``--json``
shapes, paging, and its refusals (one line, a stable code, nothing written)."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any
from uuid import UUID

import pytest
from cli_helpers import Run, assert_one_error_line, event_count, invoke

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "workflows"))
from store_helpers import assert_history_holds, ext, job, spec

from ledger import Ledger
from ledger.clock import SystemClock
from ledger.jobs.outcomes import Completion
from ledger.testing import FakeClock

GATED = spec(
    job("a"),
    job("b"),
    ext("gate", "a", "b"),
    job("c", "gate"),
    job("d", "c:t"),
    result_step="c",
)
"""A fan-out of two job steps, an approval gate as their fan-in, then a chain."""


@pytest.fixture
def defined(ledger: Ledger, clock: FakeClock, monkeypatch: pytest.MonkeyPatch) -> Ledger:
    """The ledger with ``work`` defined; the CLI's commands read the same fake clock (one
    clock: a run submitted by the CLI is claimable by the test's ledger)."""
    monkeypatch.setattr(SystemClock, "now", lambda _: clock.now())
    ledger.define("work")
    return ledger


def _start(run: Run, request: dict[str, Any], tmp_path: Path) -> UUID:
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(request))
    result = run("workflow", "start", str(path))
    assert result.exit_code == 0, result.output
    return UUID(result.stdout.strip())


def _work_all(ledger: Ledger, clock: FakeClock) -> None:
    """Claim and succeed every claimable job, one at a time, until none is left."""
    while claimed := ledger.claim("worker-1", limit=1):
        clock.advance(1)
        ledger.succeed(claimed[0].lease, output={"done": claimed[0].payload["key"]})
        clock.advance(1)


def test_start_prints_the_run_id_and_a_repeat_names_the_existing_run(
    run: Run, defined: Ledger, tmp_path: Path
) -> None:
    """start prints the new run's id; the same keyed request again prints it again, says so
    on stderr, and --json tells created from found."""
    request = {**GATED, "idempotency_key": "k1"}
    run_id = _start(run, request, tmp_path)
    assert defined.workflows.handle(run_id).status().value == "running"
    again = run("workflow", "start", "-", stdin=json.dumps(request))
    assert again.stdout.strip() == str(run_id)
    assert "existing run" in again.stderr
    shaped = json.loads(run("workflow", "start", "-", "--json", stdin=json.dumps(request)).stdout)
    assert shaped == {"run_id": str(run_id), "created": False}


@pytest.mark.parametrize(
    ("text", "starts", "exit_code"),
    [
        ('{"workflow_type": ', "error: Invalid value for 'SPEC.json|-': stdin is not valid", 2),
        ("[1, 2]", "error: Invalid value for 'SPEC.json|-': stdin must hold a JSON object", 2),
        ('{"workflow_type": "x"}', "error: workflow.invalid_spec: workflow request:", 1),
        (
            json.dumps(spec(job("a", "c"), job("b", "a"), job("c", "b"))),
            "error: workflow.dependency_cycle: dependencies form a cycle: a -> b -> c -> a",
            1,
        ),
        (
            json.dumps(spec(job("a", job_type="nope"))),
            "error: workflow.definition_not_found_or_disabled",
            1,
        ),
    ],
    ids=["malformed-json", "not-an-object", "no-steps", "cycle", "undefined-type"],
)
def test_bad_spec_is_one_line_and_writes_nothing(
    run: Run, defined: Ledger, db_url: str, *, text: str, starts: str, exit_code: int
) -> None:
    """A spec that is not JSON, not an object, or no valid run is refused before a write."""
    before = event_count(db_url)
    assert_one_error_line(run("workflow", "start", "-", stdin=text), starts, exit_code)
    assert event_count(db_url) == before


def test_show_lists_the_steps_with_running_attempt_and_the_result(
    run: Run, defined: Ledger, clock: FakeClock, tmp_path: Path
) -> None:
    """show's table has each step's kind, status (running while leased), job and attempt;
    --json carries the run's header and the steps; after the run ends, its result."""
    run_id = _start(run, GATED, tmp_path)
    [leased] = defined.claim("worker-1", limit=1)
    text = run("workflow", "show", str(run_id)).stdout
    rows = {line.split()[0]: line.split() for line in text.splitlines()[10:]}
    assert rows["a"][:5] == ["a", "job", "running", str(leased.job_id), "1"]
    assert rows["gate"][:4] == ["gate", "external", "blocked", "-"]
    defined.succeed(leased.lease, output={"done": "a"})
    _work_all(defined, clock)
    assert run("workflow", "complete", str(run_id), "gate", "--status", "succeeded").exit_code == 0
    _work_all(defined, clock)
    shaped = json.loads(run("workflow", "show", str(run_id), "--json").stdout)
    assert shaped["status"] == "succeeded"
    assert shaped["result"] == {"done": "c"}
    assert shaped["counts"] == {"succeeded": 5}
    assert [step["key"] for step in shaped["steps"]] == ["a", "b", "gate", "c", "d"]
    assert set(shaped["steps"][0]) >= {"kind", "status", "job_id", "attempt", "released_at"}
    assert 'result     {"done":"c"}' in run("workflow", "show", str(run_id)).stdout
    assert_history_holds(defined)


def test_list_filters_and_pages_with_a_cursor(
    run: Run, defined: Ledger, clock: FakeClock, tmp_path: Path
) -> None:
    """list filters by type, status and org, and pages in submit order by cursor."""
    ids = []
    for i in range(3):
        ids.append(_start(run, {**GATED, "org": f"org{i % 2}"}, tmp_path))
        clock.advance(1)
    other = _start(run, {**GATED, "workflow_type": "other"}, tmp_path)
    run("workflow", "cancel", str(other))
    first = json.loads(run("workflow", "list", "--type", "test", "--limit", "2", "--json").stdout)
    assert [r["run_id"] for r in first["runs"]] == [str(i) for i in ids[:2]]
    second = run("workflow", "list", "--type", "test", "--limit", "2", "--cursor",
                 first["next_cursor"], "--json")  # fmt: skip
    assert [r["run_id"] for r in json.loads(second.stdout)["runs"]] == [str(ids[2])]
    assert json.loads(second.stdout)["next_cursor"] is None
    text = run("workflow", "list", "--type", "test", "--limit", "2")
    assert f"more: add --cursor {first['next_cursor']}" in text.stderr
    cancelled = json.loads(run("workflow", "list", "--status", "cancelled", "--json").stdout)
    assert [r["run_id"] for r in cancelled["runs"]] == [str(other)]
    org1 = json.loads(run("workflow", "list", "--org", "org1", "--json").stdout)
    assert [r["run_id"] for r in org1["runs"]] == [str(ids[1])]


def test_complete_refusals_name_their_codes(
    run: Run, defined: Ledger, clock: FakeClock, db_url: str, tmp_path: Path
) -> None:
    """Unknown run, unknown step, a job step, a blocked gate, and a second different
    completion are each one error line with their code; the same completion again is fine."""
    run_id = _start(run, GATED, tmp_path)
    missing = "00000000-0000-4000-8000-000000000000"
    cases = [
        ((missing, "gate"), "error: workflow.not_found"),
        ((str(run_id), "nope"), "error: workflow.step_not_found"),
        ((str(run_id), "a"), "error: workflow.step_not_external"),
        ((str(run_id), "gate"), "error: workflow.invalid_transition"),
    ]
    for (target, step), starts in cases:
        before = event_count(db_url)
        result = run("workflow", "complete", target, step, "--status", "succeeded")
        assert_one_error_line(result, starts)
        assert event_count(db_url) == before
    _work_all(defined, clock)
    done = run("workflow", "complete", str(run_id), "gate", "--status", "succeeded",
               "--output", '{"by": "ann"}', "--reason", "looks right")  # fmt: skip
    assert done.stdout.startswith(f"completed gate (succeeded); run {run_id} is running")
    same = run("workflow", "complete", str(run_id), "gate", "--status", "succeeded",
               "--output", '{"by": "ann"}', "--reason", "looks right")  # fmt: skip
    assert same.exit_code == 0, same.output
    other = run("workflow", "complete", str(run_id), "gate", "--status", "failed")
    assert_one_error_line(other, "error: workflow.completion_conflict")
    bad = run("workflow", "complete", str(run_id), "gate", "--status", "ok")
    assert bad.exit_code == 2
    assert_one_error_line(run("workflow", "show", missing), "error: workflow.not_found")
    assert_one_error_line(run("workflow", "show", "x"), "error: Invalid value for 'RUN'", 2)


def _fields(shown: str) -> dict[str, str]:
    """``workflow show``'s header lines (label, two or more spaces, value) up to the table."""
    fields = {}
    for line in shown.split("\n\n", 1)[0].splitlines():
        label, value = re.split(r"\s{2,}", line, maxsplit=1)
        fields[label] = value
    return fields


def test_cancel_then_recover_from_a_step(
    run: Run, defined: Ledger, clock: FakeClock, tmp_path: Path
) -> None:
    """cancel ends the run and its live jobs; recover --from starts a new run that reuses
    the steps that succeeded, and the same --key again returns it."""
    run_id = _start(run, GATED, tmp_path)
    [leased] = defined.claim("worker-1", limit=1)
    defined.succeed(leased.lease, output={"done": "a"})
    cancelled = run("workflow", "cancel", str(run_id), "--reason", "wrong day")
    assert cancelled.stdout.strip() == f"cancelled; run {run_id} is cancelled"
    assert run("workflow", "cancel", str(run_id)).exit_code == 0  # again: nothing changes
    recovered = run("workflow", "recover", str(run_id), "--from", "b", "--key", "r1", "--json")
    shaped = json.loads(recovered.stdout)
    assert shaped["created"] is True
    again = run("workflow", "recover", str(run_id), "--from", "b", "--key", "r1")
    assert again.stdout.strip() == shaped["run_id"]
    shown = _fields(run("workflow", "show", shaped["run_id"]).stdout)
    assert shown["recovered from"] == f"{run_id} at step b"
    header = json.loads(run("workflow", "show", shaped["run_id"], "--json").stdout)
    assert header["recovered_from"] == str(run_id)
    assert header["recovered_from_step"] == "b"
    steps = {
        s.key: s.status.value for s in defined.workflows.handle(UUID(shaped["run_id"])).steps()
    }
    assert steps["a"] == "succeeded"  # reused
    assert steps["b"] == "enqueued"
    unknown = run("workflow", "recover", str(run_id), "--from", "zz")
    assert_one_error_line(unknown, "error: workflow.")
    assert_history_holds(defined)


def test_timeline_interleaves_run_and_job_events_in_recorded_order(
    run: Run, defined: Ledger, clock: FakeClock
) -> None:
    """Each release precedes its job's enqueue, each job's end precedes the step end it
    causes, and every stream keeps its own order; --json names the stream and step."""
    started = defined.workflows.submit(spec(job("a"), job("b", "a"), result_step="b"))
    clock.advance(1)
    _work_all(defined, clock)
    result = run("workflow", "timeline", str(started.run_id), "--json")
    names = [(entry["step"], entry["event"]) for entry in json.loads(result.stdout)]
    assert names == [
        (None, "workflow_submitted"),
        (None, "workflow_step_released"),
        ("a", "job_enqueued"),
        ("a", "job_leased"),
        ("a", "job_succeeded"),
        (None, "workflow_step_succeeded"),
        (None, "workflow_step_released"),
        ("b", "job_enqueued"),
        ("b", "job_leased"),
        ("b", "job_succeeded"),
        (None, "workflow_step_succeeded"),
        (None, "workflow_status_changed"),
    ]
    first = json.loads(result.stdout)[0]
    assert set(first) == {"stream", "step", "version", "event", "at", "fields"}
    assert first["stream"] == str(started.run_id)
    assert first["fields"]["request"]["workflow_type"] == "test"
    text = run("workflow", "timeline", str(started.run_id)).stdout.splitlines()
    assert text[0].split() == ["AT", "STREAM", "VERSION", "EVENT", "DETAIL"]
    assert text[3].split()[1:4] == ["a", "1", "job_enqueued"]


def test_graph_in_three_formats(run: Run, defined: Ledger) -> None:
    """graph draws a small DAG as text, DOT and Mermaid, with each step's status and the
    on_terminal edge labelled."""
    started = defined.workflows.submit(spec(job("a"), ext("gate", "a"), job("b", "gate:t")))
    target = str(started.run_id)
    assert run("workflow", "graph", target).stdout == (
        "a (job, enqueued)\ngate (external, blocked) <- a\nb (job, blocked) <- gate [on_terminal]\n"
    )
    assert run("workflow", "graph", target, "--format", "dot").stdout == (
        f'digraph "{target}" {{\n'
        "  rankdir=LR;\n"
        '  "a" [shape=box, label="a\\nenqueued"];\n'
        '  "gate" [shape=hexagon, label="gate\\nblocked"];\n'
        '  "b" [shape=box, label="b\\nblocked"];\n'
        '  "a" -> "gate";\n'
        '  "gate" -> "b" [label="on_terminal"];\n'
        "}\n"
    )
    assert run("workflow", "graph", target, "--format", "mermaid").stdout == (
        "flowchart LR\n"
        '  s0["a<br/>enqueued"]\n'
        '  s1{{"gate<br/>blocked"}}\n'
        '  s2["b<br/>blocked"]\n'
        "  s0 --> s1\n"
        "  s1 -->|on_terminal| s2\n"
    )


def test_the_demo_runs_its_workflow_to_succeeded(db_url: str) -> None:
    """demo runs its fan-out, fan-in and approval gate to succeeded on its own worker, the
    gate completed by the demo, and the history holds afterwards."""
    result = invoke(db_url, "demo", "--jobs", "20", "--json")
    assert result.exit_code == 0, result.stderr
    run = json.loads(result.stdout)["workflow"]
    assert run["status"] == "succeeded"
    assert run["result"] == {"published": "daily-sales"}
    with Ledger.open(db_url) as ledger:
        steps = ledger.workflows.handle(UUID(run["run_id"])).steps()
        assert [(s.key, s.status.value) for s in steps] == [
            ("fetch-eu", "succeeded"),
            ("fetch-us", "succeeded"),
            ("fetch-apac", "succeeded"),
            ("merge", "succeeded"),
            ("approve", "succeeded"),
            ("publish", "succeeded"),
        ]
        assert steps[3].output == {"regions": 3, "rows": 600}  # read its fetches' outputs
        assert steps[4].output == {"approved_by": "demo"}
        assert_history_holds(ledger)


def _recorded_order(ledger: Ledger, streams: set[UUID]) -> list[tuple[UUID, int]]:
    """The streams' events in notification order, read from the whole log (the truth the
    timeline's merge must agree with)."""
    with ledger.store.read_snapshot() as tables:
        events = tables.events_after(0, 100_000)
    return [(e.originator_id, e.version) for e in events if e.originator_id in streams]


def test_timeline_order_is_the_recorded_order_for_a_batch_and_a_cancel(
    defined: Ledger, clock: FakeClock
) -> None:
    """Two steps' jobs ended in one batch (their step ends follow both), a fan-in released
    by them, then a run cancel (its step cancels before the job's job_cancelled): the
    timeline lists exactly the order the log recorded."""
    started = defined.workflows.submit(spec(job("a"), job("b"), job("c", "a", "b"), job("d", "c")))
    clock.advance(1)
    first = defined.claim("worker-1", limit=2)
    clock.advance(1)
    defined.succeed_many([Completion(claimed.lease, output={"n": 1}) for claimed in first])
    clock.advance(1)
    defined.claim("worker-1", limit=1)  # c, leased when the run is cancelled
    clock.advance(1)
    defined.workflows.cancel(started.run_id, "stop")
    entries = defined.workflows.timeline(started.run_id)
    streams = {entry.record.originator_id for entry in entries}
    merged = [(e.record.originator_id, e.record.originator_version) for e in entries]
    assert merged == _recorded_order(defined, streams)
    names = [e.record.event.name for e in entries]
    assert names.index("workflow_cancelled") < names.index("job_cancelled")


def test_reads_of_an_unknown_run_and_a_failed_completion_with_an_output_are_refused(
    run: Run, defined: Ledger, clock: FakeClock, tmp_path: Path
) -> None:
    """timeline and graph of no run are workflow.not_found; a failed completion with an
    output is request.invalid; a failed gate ends the run completed_with_errors."""
    missing = "00000000-0000-4000-8000-000000000000"
    for command in ("timeline", "graph", "cancel"):
        assert_one_error_line(run("workflow", command, missing), "error: workflow.not_found")
    run_id = _start(run, spec(job("a"), ext("gate", "a"), job("b", "gate")), tmp_path)
    _work_all(defined, clock)
    with_output = run("workflow", "complete", str(run_id), "gate", "--status", "failed",
                      "--output", "{}")  # fmt: skip
    assert_one_error_line(with_output, "error: request.invalid")
    failed = run("workflow", "complete", str(run_id), "gate", "--status", "failed",
                 "--reason", "numbers wrong")  # fmt: skip
    assert failed.stdout.strip() == (
        f"completed gate (failed); run {run_id} is completed_with_errors"
    )
    steps = json.loads(run("workflow", "show", str(run_id), "--json").stdout)["steps"]
    assert [(s["key"], s["status"], s["code"], s["reason"]) for s in steps[1:]] == [
        ("gate", "failed", None, "numbers wrong"),
        ("b", "cancelled", "workflow.dependency_unsatisfied", steps[2]["reason"]),
    ]
    assert_history_holds(defined)


def test_graph_and_show_include_appended_steps_and_a_recovery_names_its_source(
    run: Run, defined: Ledger, clock: FakeClock
) -> None:
    """Steps appended to a live run are drawn with their edges; a recovered run's show
    names the run it recovered, a cancelled one's the cancel's reason."""
    started = defined.workflows.submit(spec(job("a"), ext("gate", "a")))
    defined.workflows.append_steps(started.run_id, [job("late", "gate:t")], "grow-1")
    assert run("workflow", "graph", str(started.run_id)).stdout.splitlines()[-1] == (
        "late (job, blocked) <- gate [on_terminal]"
    )
    _work_all(defined, clock)
    defined.workflows.complete_step(started.run_id, "gate", True)
    _work_all(defined, clock)
    recovered = defined.workflows.recover(started.run_id, "late", "again", "k")
    fields = _fields(run("workflow", "show", str(recovered.run_id)).stdout)
    assert fields["recovered from"] == f"{started.run_id} at step late"
    assert fields["recovery reason"] == "again"
    defined.workflows.cancel(recovered.run_id, "not today")
    fields = _fields(run("workflow", "show", str(recovered.run_id)).stdout)
    assert fields["cancel reason"] == "not today"
