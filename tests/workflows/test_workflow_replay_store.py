"""``jobledger replay --check`` over workflow runs in a real store, on both backends: with
``--all`` every run is re-decided after the jobs, a run's id checks that run alone, a clean
history gives no finding and a tampered run's stream is a finding (exit 3)."""

from __future__ import annotations

import json
from uuid import UUID

from click.testing import CliRunner, Result
from eventsourcing.persistence import StoredEvent
from store_helpers import ext, job, registry, spec

from jobledger_cli.main import cli
from ledger import FakeClock, Ledger
from ledger.core.workflows.events import WorkflowStatusChanged
from ledger.core.workflows.status import RunStatus
from ledger.testing import drain


def _invoke(url: str, *args: str) -> Result:
    return CliRunner().invoke(cli, ["--db", url, *args])


async def _two_runs(url: str, clock: FakeClock) -> tuple[UUID, UUID]:
    """One run that succeeded through a gate, one that completed with errors."""
    with Ledger.open(url, clock=clock) as ledger:
        ledger.define("work", max_attempts=1)
        gated = ledger.workflows.submit(spec(job("a"), ext("gate", "a"), job("b", "gate"))).run_id
        failing = ledger.workflows.submit(spec(job("x"), job("y", "x"))).run_id
        await drain(ledger, registry(failing=frozenset({"x"})))
        ledger.workflows.complete_step(gated, "gate", True, output={"ok": 1})
        await drain(ledger, registry())
    return gated, failing


async def test_runs_replay_clean_with_the_jobs(db_url: str, clock: FakeClock) -> None:
    """``--check --all`` checks 3 step jobs and 2 runs, every event of both: no finding;
    ``--check RUN`` checks the one run."""
    gated, _ = await _two_runs(db_url, clock)
    result = _invoke(db_url, "replay", "--check", "--all", "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert (report["jobs"], report["runs"], report["findings"]) == (3, 2, [])
    with Ledger.open(db_url) as ledger:
        run_events = len(ledger.workflows.history(gated))
    one = _invoke(db_url, "replay", "--check", str(gated))
    assert one.exit_code == 0, one.output
    assert f"checked 0 job(s) and 1 workflow run(s), {run_events} event(s)" in one.stdout


async def test_a_tampered_run_is_a_finding_and_exits_3(db_url: str, clock: FakeClock) -> None:
    """A roll-up the steps do not add up to, inserted into a finished run's stream without
    the fold (as a corrupt import would): two findings at that event, named by the run (the
    last command's re-decision did not write it; the fold refuses it)."""
    gated, _ = await _two_runs(db_url, clock)
    with Ledger.open(db_url, clock=clock) as ledger:
        version = len(ledger.workflows.history(gated)) + 1
        bogus = WorkflowStatusChanged(at=clock.now(), status=RunStatus.COMPLETED_WITH_ERRORS)
        with ledger.store.unit_of_work() as uow:
            stored = [StoredEvent(gated, version, *ledger.store.codec.encode(bogus))]
            uow._insert_stored_events(stored, positions_needed=False)
    result = _invoke(db_url, "replay", "--check", "--all")
    assert result.exit_code == 3, result.output
    for rule in ("decision.differs", "history.illegal_transition"):
        assert f"run {gated} event {version} workflow_status_changed: {rule}" in result.stdout
    assert "error: replay.findings: 2 event(s)" in result.stderr
