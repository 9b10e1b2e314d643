"""Workflow runs through export and import, on both backends: a run's stream and its step
jobs' streams come out, go into a fresh ledger and give the same views; a second import is
skipped as for jobs, a different history of the run is refused, and a filtered export brings
the run's other step jobs with it."""

from __future__ import annotations

import json
from typing import Any
from uuid import UUID

import msgspec
from exchange_files import parts, resealed
from exchange_helpers import export_bytes, invoke

from ledger import FakeClock, Ledger
from ledger.core.values import JSON
from ledger.core.workflows.ids import step_job_id
from ledger.runtime.handlers import PermanentError, Registry
from ledger.testing import drain


def _job(key: str, *after: str) -> dict[str, Any]:
    return {
        "kind": "job",
        "key": key,
        "job_type": "work",
        "payload": {"key": key},
        "depends_on": [{"step": step} for step in after],
    }


def _registry() -> Registry:
    """``work`` returns its key; step ``a`` fails for good (a dead letter at once)."""
    handlers = Registry()

    @handlers.handler("work")
    def work(ctx: Any) -> JSON:
        if ctx.payload["key"] == "a":
            raise PermanentError("a fails")
        return {"key": ctx.payload["key"]}

    return handlers


async def _runs(url: str, clock: FakeClock) -> list[UUID]:
    """A run that completes with errors (a dead letter, an unsatisfied cancel, a completed
    gate), one cancelled with a job pending, one with an idempotency key that succeeded, and
    a plain job beside them."""
    with Ledger.open(url, clock=clock) as ledger:
        ledger.define("work", max_attempts=2)
        ledger.enqueue("work", {"key": "plain"})
        gated = ledger.workflows.submit(
            {
                "workflow_type": "etl",
                "org": "acme",
                "result_step": "c",
                "steps": [
                    _job("root"),
                    _job("a", "root"),
                    _job("b", "a"),
                    {"kind": "external", "key": "gate", "depends_on": [{"step": "root"}]},
                    _job("c", "gate"),
                ],
            }
        ).run_id
        keyed = ledger.workflows.submit(
            {"workflow_type": "etl", "idempotency_key": "k1", "steps": [_job("only")]}
        ).run_id
        await drain(ledger, _registry())
        clock.advance(30)
        ledger.workflows.complete_step(gated, "gate", True, output={"by": "ann"})
        await drain(ledger, _registry())
        cancelled = ledger.workflows.submit(
            {"workflow_type": "etl", "steps": [_job("x"), _job("y", "x")]}
        ).run_id
        ledger.workflows.cancel(cancelled, "not today")
    return [gated, keyed, cancelled]


def _reads(ledger: Ledger, runs: list[UUID]) -> list[Any]:
    """What the workflow reads say of each run: status, result, steps, history."""
    out: list[Any] = [[run.run_id for run in ledger.workflows.runs(limit=100).runs]]
    for run in runs:
        handle = ledger.workflows.handle(run)
        out.append((handle.status(), handle.result(), handle.steps()))
        out.append(ledger.workflows.history(run))
        for step in handle.steps():
            if step.job_id is not None:
                out.append(ledger.history(step.job_id))
    return out


async def test_runs_round_trip_with_the_same_views_and_bytes(
    db_url: str, target_url: str, clock: FakeClock
) -> None:
    """Export every run and job, import into an empty ledger: the same workflow reads and
    histories, ``projections verify`` clean, and the target exports the same bytes."""
    runs = await _runs(db_url, clock)
    data = export_bytes(db_url)
    kinds = {json.loads(line)["kind"] for line in parts(data)[1]}
    assert kinds == {"job_type", "job", "workflow"}
    imported = invoke(target_url, "import", "-", stdin=data)
    assert imported.exit_code == 0, imported.stderr
    assert "and 3 workflow runs" in imported.stderr
    assert export_bytes(target_url) == data
    with Ledger.open(db_url) as source, Ledger.open(target_url) as target:
        assert _reads(target, runs) == _reads(source, runs)
        report = target.projections().verify()
        assert report.clean, [view for view in report.views if view.drift_count]
        assert [f for replay in target.replay_check_all() for f in replay.findings] == []


async def test_a_second_import_skips_the_runs_and_another_history_is_refused(
    db_url: str, target_url: str, clock: FakeClock
) -> None:
    """The same file again changes nothing (every run skipped); a file whose run stream
    differs from the target's (its last event left out) is refused, nothing written."""
    await _runs(db_url, clock)
    data = export_bytes(db_url)
    assert invoke(target_url, "import", "-", stdin=data).exit_code == 0
    again = invoke(target_url, "import", "-", "--json", stdin=data)
    assert again.exit_code == 0, again.stderr
    report = json.loads(again.stdout)
    assert (report["runs"], report["skipped_runs"], report["events"]) == (0, 3, 0)
    lines = data.splitlines(keepends=True)
    last_run_line = max(i for i, line in enumerate(lines) if b'"kind":"workflow"' in line)
    tampered = resealed(b"".join(lines[:last_run_line] + lines[last_run_line + 1 :]))
    refused = invoke(target_url, "import", "-", stdin=tampered)
    assert refused.exit_code != 0
    assert "workflow run" in refused.stderr and "different history" in refused.stderr


async def test_a_filtered_export_brings_the_runs_other_step_jobs(
    db_url: str, clock: FakeClock
) -> None:
    """Exporting one step's job writes its run and every step job of that run (after the
    selected one), and no other run or job."""
    gated, *_ = await _runs(db_url, clock)
    root = step_job_id(gated, "root")
    data = export_bytes(db_url, str(root))
    streams = [msgspec.json.decode(line)["stream"] for line in parts(data)[1]]
    jobs = {str(step_job_id(gated, key)) for key in ("root", "a", "c")}
    assert set(streams) - {streams[0]} == jobs | {str(gated)}  # streams[0]: the definition
    assert streams[1] == str(root) and streams[-1] == str(gated)


def test_a_run_stream_without_its_submit_is_a_bad_line(db_url: str, target_url: str) -> None:
    """A run's stream whose ``workflow_submitted`` line is left out is refused with the line
    number of what follows it, and nothing is written."""
    with Ledger.open(db_url) as ledger:
        ledger.define("work")
        ledger.workflows.submit({"workflow_type": "etl", "steps": [_job("only")]})
    lines = export_bytes(db_url).splitlines(keepends=True)
    first_run = min(i for i, line in enumerate(lines) if b'"kind":"workflow"' in line)
    refused = invoke(
        target_url, "import", "-", stdin=b"".join(lines[:first_run] + lines[first_run + 1 :])
    )
    assert refused.exit_code != 0
    assert f"line {first_run + 1}: stream" in refused.stderr
    assert "starts at version 2" in refused.stderr
    with Ledger.open(target_url, create=True) as target:
        assert target.store.head_position() == 0


async def test_a_run_whose_idempotency_key_another_run_holds_is_refused(
    db_url: str, target_url: str, clock: FakeClock
) -> None:
    """The target has another run under the file's run's idempotency key: the import is
    refused before anything is written (the workflow view's unique index would refuse it
    mid-import)."""
    await _runs(db_url, clock)
    data = export_bytes(db_url)
    with Ledger.open(db_url) as source:
        [plain] = [j.state.job_id for j in source.jobs(limit=100).jobs if j.state.workflow is None]
    # The target gets the source's definition stream (with the plain job), then a run of its
    # own under the key.
    assert invoke(target_url, "import", "-", stdin=export_bytes(db_url, str(plain))).exit_code == 0
    with Ledger.open(target_url) as target:
        target.workflows.submit(
            {"workflow_type": "etl", "idempotency_key": "k1", "steps": [_job("other")]}
        )
        before = target.store.head_position()
    refused = invoke(target_url, "import", "-", "--into-live", stdin=data)
    assert refused.exit_code == 1
    assert "import.conflict" in refused.stderr and "idempotency key 'k1'" in refused.stderr
    with Ledger.open(target_url) as target:
        assert target.store.head_position() == before
