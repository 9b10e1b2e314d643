"""Workflow runs in the audit view, on both backends: ``audit --workflow RUN`` lists the run's
own events and its step jobs' events in order, and a run's own rows answer the other filters
(type, org, event, code, time) as a job's do."""

from __future__ import annotations

import json
from uuid import UUID

import pytest
from click.testing import CliRunner
from store_helpers import assert_history_holds, ext, job, registry, spec

from jobledger_cli.main import cli
from ledger import AuditQuery, FakeClock, Ledger
from ledger.core.workflows.ids import step_job_id
from ledger.testing import drain
from projections.tracked import TrackedRunner


@pytest.fixture
def wf(ledger: Ledger) -> Ledger:
    ledger.define("work", max_attempts=2)
    return ledger


async def _gated_run(ledger: Ledger, clock: FakeClock) -> UUID:
    """root -> a (dead-lettered) -> b (cancelled as unsatisfied); root -> gate (completed);
    a plain job beside it, in another org."""
    ledger.enqueue("work", {"key": "plain"}, org="other")
    run = ledger.workflows.submit(
        spec(job("root"), job("a", "root"), job("b", "a"), ext("gate", "root"), org="acme")
    ).run_id
    await drain(ledger, registry(failing=frozenset({"a"})))
    clock.advance(60)
    ledger.workflows.complete_step(run, "gate", True, output={"by": "ann"})
    return run


def _expected(ledger: Ledger, run: UUID) -> set[tuple[UUID, int]]:
    """Every (stream, version) of the run's own stream and of its step jobs' streams."""
    streams = [ledger.workflows.history(run)] + [
        ledger.history(step_job_id(run, key)) for key in ("root", "a", "gate", "b")
    ]
    return {(r.originator_id, r.originator_version) for records in streams for r in records}


async def test_audit_by_workflow_lists_the_runs_and_its_step_jobs_events_in_order(
    wf: Ledger, clock: FakeClock
) -> None:
    """Every event of the run's stream and of its step jobs' streams, in position order, each
    with the run and step; nothing of the plain job; the run's own rows carry its type and
    org; the view verifies clean against the replay."""
    run = await _gated_run(wf, clock)
    rows = wf.audit(AuditQuery(workflow=run, order="oldest", limit=1000)).rows
    assert [r.position for r in rows] == sorted(r.position for r in rows)
    by_stream: dict[UUID, int] = {}
    seen = set()
    for row in rows:
        by_stream[row.job_id] = by_stream.get(row.job_id, 0) + 1
        seen.add((row.job_id, by_stream[row.job_id]))
    assert seen == _expected(wf, run)
    assert {r.workflow_run for r in rows} == {run}
    own = [r for r in rows if r.job_id == run]
    assert own[0].event == "workflow_submitted" and own[0].step_key is None
    assert {(r.job_type, r.org) for r in own} == {("test", "acme")}
    steps = {r.step_key for r in rows if r.event == "job_enqueued"}
    assert steps == {"root", "a"}  # b was never released; the gate has no job
    cancelled = [r for r in own if r.event == "workflow_step_cancelled"]
    assert [(r.step_key, r.code) for r in cancelled] == [("b", "workflow.dependency_unsatisfied")]
    assert_history_holds(wf)


async def test_the_other_filters_match_a_runs_own_rows(wf: Ledger, clock: FakeClock) -> None:
    """By workflow type, org, event and code a run's own rows are found as a job's are, and
    a time range cuts them like any row."""
    run = await _gated_run(wf, clock)
    by_type = wf.audit(AuditQuery(job_type="test", limit=1000)).rows
    assert by_type and {r.job_id for r in by_type} == {run}
    by_org = wf.audit(AuditQuery(org="acme", limit=1000)).rows
    assert {r.workflow_run for r in by_org} == {run}  # the step jobs' org is the run's
    released = wf.audit(AuditQuery(events=("workflow_step_released",), order="oldest")).rows
    assert [r.step_key for r in released] == ["root", "a", "gate"]
    failed = wf.audit(AuditQuery(code="job.permanent_error", limit=1000)).rows
    assert {(r.event, r.step_key) for r in failed} == {
        ("job_failed", "a"),
        ("job_dead_lettered", "a"),
        ("workflow_step_failed", "a"),
    }
    completed = wf.audit(AuditQuery(workflow=run, since=clock.now(), order="oldest")).rows
    assert [r.event for r in completed] == [
        "workflow_external_step_completed",
        "workflow_status_changed",
    ]


async def test_cli_audit_workflow_prints_json_and_jsonl(
    wf: Ledger, clock: FakeClock, db_url: str
) -> None:
    """``jobledger audit --workflow RUN --json`` and ``--format jsonl`` give the same rows,
    with ``workflow_run`` and ``step_key``; ``--org`` narrows as for jobs."""
    run = await _gated_run(wf, clock)
    url = db_url
    runner = CliRunner()
    as_json = runner.invoke(cli, ["--db", url, "audit", "--workflow", str(run), "--json"])
    assert as_json.exit_code == 0, as_json.output
    rows = json.loads(as_json.stdout)["rows"]
    assert rows and {r["workflow_run"] for r in rows} == {str(run)}
    assert rows[-1]["event"] == "workflow_submitted"  # newest first
    args = ["--db", url, "audit", "--workflow", str(run), "--format", "jsonl", "--limit", "1000"]
    lines = runner.invoke(cli, args).stdout.splitlines()
    assert [json.loads(line) for line in lines] == rows
    table = runner.invoke(cli, ["--db", url, "audit", "--workflow", str(run), "--org", "x"])
    assert table.exit_code == 0 and "no audit rows match" in table.stdout


async def test_the_runner_reads_origins_of_runs_and_step_jobs_from_the_views(
    wf: Ledger, clock: FakeClock
) -> None:
    """Caught up one event per batch by a fresh runner each time (no cache, every stream's
    first event in an earlier batch): a run's rows get its type and org from
    ``jl_workflow_runs``, a step job's its link from its ``jl_queue`` state; the rows equal
    the replay's."""
    run = await _gated_run(wf, clock)
    store = wf.store
    while TrackedRunner(store, batch=1).run_once():
        pass
    assert wf.projections().verify(["audit"]).clean
    rows = wf.audit(AuditQuery(workflow=run, order="oldest", limit=1000), catch_up=False).rows
    assert {(r.job_type, r.org) for r in rows if r.job_id == run} == {("test", "acme")}
    assert {r.step_key for r in rows if r.event == "job_succeeded"} == {"root"}
