"""`jobledger cancel`: pending and leased jobs cancelled, refusals clear, late writes fenced."""

from __future__ import annotations

import json
from uuid import UUID, uuid4

import pytest
from cli_helpers import assert_one_error_line, event_count, invoke

from ledger import JobStatus, Ledger
from ledger.core.errors import LeaseOwnerMismatchError


def assert_history_holds(url: str) -> None:
    """`projections verify` and `replay --check --all` are clean."""
    with Ledger.open(url) as ledger:
        assert ledger.projections().verify().clean
        assert [f for job in ledger.replay_check_all() for f in job.findings] == []


def test_cancel_a_pending_job_records_the_reason(db_url: str) -> None:
    """A pending job becomes cancelled with the operator's reason; the output names it."""
    with Ledger.open(db_url) as ledger:
        ledger.define("t")
        job_id = ledger.enqueue("t").job_id
    result = invoke(db_url, "cancel", str(job_id), "--reason", "customer left")
    assert result.exit_code == 0, result.stderr
    assert result.stdout == f"cancelled {job_id} (t, was pending)\n"
    with Ledger.open(db_url) as ledger:
        state = ledger.get(job_id)  # type: ignore[arg-type]
        assert state is not None and state.status is JobStatus.CANCELLED
        assert state.reason == "customer left"
        assert ledger.history(job_id)[-1].event.name == "job_cancelled"  # type: ignore[arg-type]


def test_cancel_of_a_leased_job_fences_out_its_late_worker_write(db_url: str) -> None:
    """A leased job is cancelled at once; the worker's success arriving afterwards is refused
    by the fence (job.lease_owner_mismatch) and appends nothing."""
    with Ledger.open(db_url) as ledger:
        ledger.define("t")
        ledger.enqueue("t")
        [job] = ledger.claim("w-1", lease_s=300)
    assert job.lease is not None
    result = invoke(db_url, "cancel", str(job.job_id))
    assert result.exit_code == 0, result.stderr
    assert result.stdout == f"cancelled {job.job_id} (t, was leased by w-1)\n"
    before = event_count(db_url)
    with Ledger.open(db_url) as ledger:
        with pytest.raises(LeaseOwnerMismatchError):
            ledger.succeed(job.lease, output={"late": True})
        state = ledger.get(job.job_id)
    assert state is not None and state.status is JobStatus.CANCELLED and state.output is None
    assert event_count(db_url) == before
    assert_history_holds(db_url)


@pytest.mark.parametrize("kind", ["unknown", "terminal"])
def test_cancel_of_one_unknown_or_terminal_job_is_one_error_line(db_url: str, kind: str) -> None:
    """An unknown job is job.not_found, a finished one job.invalid_transition: one error
    line, exit 1, nothing appended."""
    with Ledger.open(db_url) as ledger:
        ledger.define("t")
        job_id: UUID | None = uuid4()
        if kind == "terminal":
            job_id = ledger.enqueue("t").job_id
            ledger.cancel(job_id)  # type: ignore[arg-type]
    before = event_count(db_url)
    result = invoke(db_url, "cancel", str(job_id))
    code = "job.not_found" if kind == "unknown" else "job.invalid_transition"
    assert_one_error_line(result, f"error: {code}: ")
    assert event_count(db_url) == before


def test_cancel_many_reports_each_job_and_exits_1_on_a_refusal(db_url: str) -> None:
    """Several ids: each is cancelled or refused on its own, all reported (JSON with
    --json); one refusal makes the exit code 1 with one error line, the rest still cancel."""
    with Ledger.open(db_url) as ledger:
        ledger.define("t")
        first, second = ledger.enqueue("t").job_id, ledger.enqueue("t").job_id
    missing = uuid4()
    result = invoke(db_url, "cancel", str(first), str(missing), str(second), "--json")
    assert result.exit_code == 1
    assert result.stderr == "error: 1 of 3 job(s) refused cancel\n"
    report = json.loads(result.stdout)
    assert [c["job_id"] for c in report["cancelled"]] == [str(first), str(second)]
    assert report["cancelled"][0] == {
        "job_id": str(first), "job_type": "t", "was": "pending", "worker_id": None
    }  # fmt: skip
    assert report["refused"] == [
        {"job_id": str(missing), "job_type": None, "code": "job.not_found",
         "message": f"no job {missing}"}
    ]  # fmt: skip
    with Ledger.open(db_url) as ledger:
        assert ledger.counts() == {"cancelled": 2}
    assert_history_holds(db_url)


def test_cancel_needs_a_job_id(db_url: str) -> None:
    """No id, or a malformed one, is a command-line error (exit 2)."""
    assert invoke(db_url, "cancel").exit_code == 2
    assert_one_error_line(invoke(db_url, "cancel", "not-a-uuid"), "error: ", exit_code=2)
