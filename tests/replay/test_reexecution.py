"""Re-execution: ``replay JOB --run --app MODULE:ATTR`` runs the handler locally on the
recorded payload (and checkpoint) and never writes to the ledger (both backends)."""

from __future__ import annotations

import json
from uuid import UUID

import pytest
from replay_helpers import RETRYABLE, invoke, lease_of

from ledger import FakeClock, Ledger

APP = "replay_app:registry"


@pytest.fixture
def jobs(db_url: str, clock: FakeClock) -> dict[str, UUID]:
    """One job per behaviour of ``replay_app``; ``plain`` has failed once after recording the
    checkpoint ``{"page": 1}``."""
    made: dict[str, UUID] = {}
    with Ledger.open(db_url, clock=clock) as ledger:
        ledger.define("r")
        ledger.define("s")
        for name in ("plain", "permanent", "transient", "crash", "not-json", "result"):
            job_id = ledger.enqueue("r", {"name": name}).job_id
            assert job_id is not None
            made[name] = job_id
        sync_id = ledger.enqueue("s", {"name": "sync"}).job_id
        assert sync_id is not None
        made["sync"] = sync_id
        [job] = ledger.claim("w1", types=["r"], lease_s=30)
        assert job.job_id == made["plain"]
        ledger.progress(lease_of(job), checkpoint={"page": 1})
        ledger.fail(lease_of(job), RETRYABLE)
    return made


def run(url: str, job_id: UUID, *args: str) -> tuple[int, str, str]:
    """Run the handler for ``job_id``; also assert the ledger's head did not move."""
    with Ledger.open(url) as ledger:
        head = ledger.store.head_position()
    result = invoke(url, "replay", str(job_id), "--run", "--app", APP, *args)
    with Ledger.open(url) as ledger:
        assert ledger.store.head_position() == head
    return result.exit_code, result.stdout, result.stderr


def test_a_handler_that_returns_prints_its_output(db_url: str, jobs: dict[str, UUID]) -> None:
    """Exit 0, the output as JSON, progress and heartbeat on stderr marked not recorded, and
    no checkpoint unless asked for; the attempt is the last one recorded."""
    code, out, err = run(db_url, jobs["plain"], "--json")
    assert code == 0, err
    report = json.loads(out)
    assert report["outcome"] == "returned"
    assert report["output"] == {"payload": {"name": "plain"}, "checkpoint": None, "attempt": 1}
    assert "[replay] progress" in err and "done=1" in err and "(not recorded)" in err
    assert "[replay] heartbeat (not recorded)" in err

    code, out, _ = run(db_url, jobs["result"])
    assert code == 0
    assert out.splitlines()[0].startswith("returned      after ")
    assert 'output        {"ok":true}' in out and "revision      r9" in out


def test_the_checkpoint_and_attempt_are_passed_when_asked(
    db_url: str, jobs: dict[str, UUID]
) -> None:
    """``--checkpoint`` hands the handler the last recorded checkpoint; ``--attempt N`` the
    attempt number it sees; a sync handler's blocking reports print too."""
    code, out, _ = run(db_url, jobs["plain"], "--checkpoint", "--attempt", "3", "--json")
    assert code == 0
    assert json.loads(out)["output"] == {
        "payload": {"name": "plain"},
        "checkpoint": {"page": 1},
        "attempt": 3,
    }
    code, out, err = run(db_url, jobs["sync"], "--json")
    assert code == 0, err
    assert json.loads(out)["output"] == {"checkpoint": None}
    assert '[replay] progress checkpoint={"page":2} (not recorded)' in err


def test_a_permanent_error_is_classified_terminal(db_url: str, jobs: dict[str, UUID]) -> None:
    """Exit 1; the failure a worker would record (terminal, the handler's code), that it
    would dead-letter, and the traceback."""
    code, out, err = run(db_url, jobs["permanent"], "--json")
    assert code == 1
    report = json.loads(out)
    assert report["failure"] == {
        "kind": "terminal",
        "code": "doc.unsupported",
        "message": "unsupported document",
    }
    assert (report["permanent"], report["would"]) == (True, "dead_letter")
    assert "PermanentError: unsupported document" in report["traceback"]

    code, out, err = run(db_url, jobs["permanent"])
    assert code == 1
    assert "classified      permanent (kind terminal, code doc.unsupported)" in out
    assert "Traceback (most recent call last)" in err


def test_transient_errors_are_classified_retryable(db_url: str, jobs: dict[str, UUID]) -> None:
    """A TransientError and any other exception: retryable, with the codes the worker would
    record, and a retry while attempts are left."""
    code, out, _ = run(db_url, jobs["transient"], "--json")
    assert code == 1
    report = json.loads(out)
    assert report["failure"]["code"] == "job.transient_error"
    assert (report["failure"]["kind"], report["permanent"], report["would"]) == (
        "retryable",
        False,
        "retry",
    )
    code, out, _ = run(db_url, jobs["crash"], "--json")
    assert code == 1
    report = json.loads(out)
    assert report["failure"] == {
        "kind": "retryable",
        "code": "job.handler_error",
        "message": "ValueError: boom",
    }
    code, out, _ = run(db_url, jobs["not-json"], "--json")
    assert code == 1
    assert json.loads(out)["failure"]["code"] == "job.invalid_output"


def test_run_needs_an_app_with_a_handler_for_the_type(db_url: str, jobs: dict[str, UUID]) -> None:
    """No --app, or an app without the job's type: usage errors (exit 2), nothing run."""
    result = invoke(db_url, "replay", str(jobs["plain"]), "--run")
    assert result.exit_code == 2
    assert result.stderr.startswith("error: --run needs --app MODULE:ATTR")
    result = invoke(db_url, "replay", str(jobs["plain"]), "--run", "--app", "replay_app:nothing")
    assert result.exit_code == 2
    assert "module 'replay_app' has no 'nothing'" in result.stderr


def test_a_workflow_steps_handler_reads_its_prerequisites_outputs(db_url: str) -> None:
    """A step's handler re-executed locally reads its prerequisites' recorded outputs, as
    it does in a worker (it used to fail: the replay's context had no way to read them)."""
    with Ledger.open(db_url) as ledger:
        ledger.define("join")
        started = ledger.workflows.submit(
            {
                "workflow_type": "replayed",
                "steps": [
                    {"kind": "external", "key": "gate"},
                    {
                        "kind": "job",
                        "key": "join",
                        "job_type": "join",
                        "depends_on": [{"step": "gate"}],
                    },
                ],
            }
        )
        ledger.workflows.complete_step(started.run_id, "gate", True, {"approved": "yes"})
        [step] = [s for s in ledger.workflows.handle(started.run_id).steps() if s.key == "join"]
    assert step.job_id is not None
    code, out, err = run(db_url, step.job_id, "--json")
    assert code == 0, err
    assert json.loads(out)["output"] == {"gate": {"approved": "yes"}}
