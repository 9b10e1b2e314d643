"""``reap`` and ``diagnose``, in-process against real SQLite and PostgreSQL databases.

The commands open their own ledger with the system clock, so expired leases are made by
claiming with a fake clock set years in the past: no row is edited and nothing sleeps.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from uuid import UUID

import msgspec
import psycopg
from cli_helpers import Run, assert_one_error_line, event_count, invoke

from ledger import FakeClock, JobStatus, Ledger
from ledger.core.events import JobDeadLettered, JobFailed, JobRetryScheduled
from ledger.maintenance.reaper import ReapedLease
from ledger.store.streams import job_type_stream_id

PAST = datetime(2020, 1, 1, tzinfo=UTC)
MISSING_JOB = "0b7c0e8e-2b8f-4a53-9c8e-3f1d2c556a11"
FINDINGS = [
    "started_without_renewal_heartbeat",
    "recorded_started_without_renewal_heartbeat",
    "longest_heartbeat_gap_s",
    "leases_lost",
    "workers_lost",
    "reap_deferrals",
    "retries",
    "time_to_first_lease_s",
]


def _expired_pair(url: str) -> tuple[UUID, UUID]:
    """Two leases that ended in 2020: ``send_email`` (org acme, 3 attempts, claimed first by
    w1) and ``resize`` (1 attempt, claimed by w2, started running and never renewed)."""
    clock = FakeClock(start=PAST)
    with Ledger.open(url, clock=clock) as ledger:
        ledger.define("send_email", max_attempts=3)
        ledger.define("resize", max_attempts=1)
        retried = ledger.enqueue("send_email", {"to": "ada"}, org="acme").job_id
        ledger.claim("w1", types=["send_email"], lease_s=10)
        clock.advance(1)
        dead = ledger.enqueue("resize", {"image": "cat.png"}).job_id
        [claim] = ledger.claim("w2", types=["resize"], lease_s=10)
        assert claim.lease is not None
        clock.advance(0.5)
        ledger.progress(claim.lease, stage="running")
    assert retried is not None and dead is not None
    return retried, dead


def _event_names(url: str, job_id: UUID) -> list[str]:
    with Ledger.open(url) as ledger:
        return [type(record.event).name for record in ledger.history(job_id)]


def _rows(section: str) -> list[list[str]]:
    """A text table's rows (headers dropped), split on whitespace."""
    return [line.split() for line in section.splitlines()[1:]]


def when_text(moment: datetime) -> str:
    """A time as the text tables print it (milliseconds, Z)."""
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _iso(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


# --- reap -------------------------------------------------------------------------------------


def test_reap_retries_one_expired_lease_and_dead_letters_another(run: Run, db_url: str) -> None:
    """reap fails both expired leases, oldest first: one retried, one dead with its payload."""
    retried, dead = _expired_pair(db_url)
    result = run("reap")
    assert result.exit_code == 0, result.stderr
    summary, reaped, dead_section = result.stdout.rstrip("\n").split("\n\n")
    assert summary == (
        "processed 2 expired lease(s): 1 retry scheduled, 1 dead-lettered; 0 deferred error(s)"
    )
    assert reaped.splitlines()[0].split() == [
        "JOB", "TYPE", "ORG", "RUN", "ATTEMPT", "WORKER", "DISPOSITION", "NEXT", "RUN",
        "STARTED", "WITHOUT", "RENEWAL",
    ]  # fmt: skip
    first, second = _rows(reaped)
    assert first[:7] == [str(retried), "send_email", "acme", "1", "1/3", "w1", "retry_scheduled"]
    assert first[8] == "no"
    assert second == [str(dead), "resize", "-", "1", "1/1", "w2", "dead_lettered", "dead", "yes"]
    assert dead_section.splitlines()[0] == "dead-lettered:"
    assert _rows(dead_section.split("\n", 1)[1]) == [[str(dead), "resize", '{"image":"cat.png"}']]

    with Ledger.open(db_url) as ledger:
        pending = ledger.get(retried)
        gone = ledger.get(dead)
        history = {job: [r.event for r in ledger.history(job)] for job in (retried, dead)}
        assert [letter.job_id for letter in ledger.dead_letters()] == [dead]
    assert pending is not None and pending.status is JobStatus.PENDING
    assert pending.last_error is not None and pending.last_error.code == "job.lease_expired"
    assert first[7] == pending.run_at.isoformat(timespec="milliseconds").replace("+00:00", "Z")
    assert gone is not None and gone.status is JobStatus.DEAD
    *_, failed, retry = history[retried]
    assert isinstance(failed, JobFailed) and isinstance(retry, JobRetryScheduled)
    assert failed.failure.kind == "lease_expired" and retry.delay_s == 60.0
    assert failed.started_without_renewal_heartbeat is False
    assert [type(e).name for e in history[dead]] == [
        "job_enqueued", "job_leased", "job_stage_changed", "job_failed", "job_dead_lettered",
    ]  # fmt: skip
    *_, failed, letter = history[dead]
    assert isinstance(failed, JobFailed) and isinstance(letter, JobDeadLettered)
    assert failed.started_without_renewal_heartbeat is letter.started_without_renewal_heartbeat
    assert letter.started_without_renewal_heartbeat is True


def test_reap_with_nothing_expired_appends_nothing(run: Run, db_url: str) -> None:
    """reap with only live leases and pending jobs reports zero and appends nothing."""
    with Ledger.open(db_url) as ledger:
        ledger.define("send_email")
        ledger.enqueue("send_email", {"n": 1})
        ledger.enqueue("send_email", {"n": 2})
        ledger.claim("w1", lease_s=3600)
    before = event_count(db_url)
    result = run("reap")
    assert result.exit_code == 0, result.stderr
    assert result.stdout == (
        "processed 0 expired lease(s): 0 retry scheduled, 0 dead-lettered; 0 deferred error(s)\n"
    )
    assert json.loads(run("reap", "--json").stdout) == {
        "processed": 0,
        "reaped": [],
        "deferred_error_count": 0,
        "deferred_errors": [],
        "dead_lettered": [],
    }
    assert event_count(db_url) == before


def test_reap_json_has_every_field_and_honours_limit_and_retry_delay(run: Run, db_url: str) -> None:
    """reap --json prints the whole report; --limit caps the pass, --retry-delay sets the delay."""
    retried, dead = _expired_pair(db_url)
    first = run("reap", "--limit", "1", "--retry-delay", "5", "--json")
    assert first.exit_code == 0, first.stderr
    report = json.loads(first.stdout)
    assert (report["processed"], report["dead_lettered"]) == (1, [])
    [lease] = report["reaped"]
    assert set(lease) == {field.name for field in msgspec.structs.fields(ReapedLease)}
    assert lease["job_id"] == str(retried)
    assert (lease["job_type"], lease["org"], lease["worker_id"]) == ("send_email", "acme", "w1")
    assert (lease["run_number"], lease["attempt"], lease["max_attempts"]) == (1, 1, 3)
    assert lease["disposition"] == "retry_scheduled" and lease["payload"] is None
    assert lease["failure"]["code"] == "job.lease_expired"
    assert lease["started_without_renewal_heartbeat"] is False
    with Ledger.open(db_url) as ledger:
        failed = ledger.history(retried)[-2].event
    assert _iso(lease["next_run_at"]) == failed.at + timedelta(seconds=5)

    second = json.loads(run("reap", "--json").stdout)
    assert second["processed"] == 1 and second["deferred_error_count"] == 0
    [letter] = second["dead_lettered"]
    assert second["reaped"] == [letter]
    assert letter["job_id"] == str(dead) and letter["payload"] == {"image": "cat.png"}
    assert letter["next_run_at"] is None and letter["checkpoint"] is None
    assert letter["started_without_renewal_heartbeat"] is True
    assert _event_names(db_url, dead)[-2:] == ["job_failed", "job_dead_lettered"]


def test_reap_defers_a_job_whose_reap_hits_the_lock_timeout(pg_url: str) -> None:
    """With --lock-timeout, a job whose dead-lettering waits on a held lock is reported as a
    deferred error (55P03), its reap rolled back and its lease pushed out by a
    job_reap_deferred event; the other job is still reaped. A second process skips it."""
    retried, dead = _expired_pair(pg_url)
    with psycopg.connect(pg_url) as holder:
        holder.execute("LOCK TABLE jl_dead_letters IN SHARE MODE")
        text = invoke(pg_url, "reap", "--lock-timeout", "0.1")
        # A new process is a new reaper: the deferral is in the job's lease, so it skips it.
        again = invoke(pg_url, "reap", "--lock-timeout", "0.1", "--json")
        holder.rollback()
    assert (text.exit_code, again.exit_code) == (0, 0), text.stderr + again.stderr
    summary, reaped, deferred = text.stdout.rstrip("\n").split("\n\n")
    assert summary.endswith("1 retry scheduled, 0 dead-lettered; 1 deferred error(s)")
    assert [row[0] for row in _rows(reaped)] == [str(retried)]
    heading, headers, row = deferred.splitlines()
    assert heading == "deferred errors (1):"
    assert headers.split() == [
        "JOB", "RUN", "ATTEMPT", "CODE", "SQLSTATE", "DEFERRED", "UNTIL", "MESSAGE",
    ]  # fmt: skip
    assert row.split()[:5] == [str(dead), "1", "1", "store.busy", "55P03"]
    assert row.endswith("canceling statement due to lock timeout")

    report = json.loads(again.stdout)
    assert (report["processed"], report["deferred_error_count"]) == (0, 0)
    assert _event_names(pg_url, dead) == [
        "job_enqueued", "job_leased", "job_stage_changed", "job_reap_deferred",
    ]  # fmt: skip
    with Ledger.open(pg_url) as ledger:
        pushed = ledger.get(dead)
        assert pushed is not None and pushed.lease_expires_at is not None
        assert row.split()[5] == when_text(pushed.lease_expires_at)
        # Once the pushed-out lease has expired, a pass reaps it.
        later = pushed.lease_expires_at + timedelta(microseconds=1)
        assert [r.job_id for r in ledger.reap(now=later).dead_lettered] == [dead]


def test_reap_refuses_a_limit_below_one(run: Run, db_url: str) -> None:
    """reap --limit 0 is a command-line error."""
    _expired_pair(db_url)
    before = event_count(db_url)
    assert_one_error_line(
        run("reap", "--limit", "0"), "error: Invalid value for '--limit': 0 is not in the range", 2
    )
    assert event_count(db_url) == before


# --- diagnose ---------------------------------------------------------------------------------


def test_diagnose_shows_a_start_without_renewal_with_its_evidence(run: Run, db_url: str) -> None:
    """diagnose of a job that started running and never renewed: true, from the start event."""
    _, job = _expired_pair(db_url)
    result = run("diagnose", str(job))
    assert result.exit_code == 0, result.stderr
    heading, *blocks = result.stdout.rstrip("\n").split("\n\n")
    assert heading == f"job {job}: leased (stage running), 3 events"
    by_name = {block.split()[0]: block.splitlines() for block in blocks}
    assert list(by_name) == FINDINGS
    flag = by_name["started_without_renewal_heartbeat"]
    assert flag[0] == "started_without_renewal_heartbeat  yes"
    assert flag[1].strip().startswith("running started and no heartbeat came after it")
    assert flag[2].split() == ["VERSION", "EVENT", "AT"]
    assert flag[3].split() == ["3", "job_stage_changed", "2020-01-01T00:00:01.500Z"]
    # The lease is still held (expired, not yet reaped): the silence runs until now.
    gap = by_name["longest_heartbeat_gap_s"]
    assert float(gap[0].split()[1]) > 365 * 24 * 3600
    assert gap[3].split() == ["2", "job_leased", "2020-01-01T00:00:01.000Z"]
    assert by_name["retries"][-1].strip() == "evidence: none"


def test_diagnose_json_lists_every_finding_with_its_events(run: Run, db_url: str) -> None:
    """diagnose --json after a reap: every finding, its value and the events behind it."""
    job, _ = _expired_pair(db_url)
    assert run("reap").exit_code == 0
    result = run("diagnose", str(job), "--json")
    assert result.exit_code == 0, result.stderr
    shown = json.loads(result.stdout)
    assert shown["job_id"] == str(job)
    findings = {finding["name"]: finding for finding in shown["findings"]}
    assert list(findings) == FINDINGS
    assert all(set(f) == {"name", "value", "explanation", "evidence"} for f in findings.values())
    with Ledger.open(db_url) as ledger:
        records = ledger.history(job)
    expected = {
        r.originator_version: {
            "version": r.originator_version,
            "event": type(r.event).name,
            "at": r.event.at.isoformat().replace("+00:00", "Z"),
        }
        for r in records
    }
    assert findings["started_without_renewal_heartbeat"]["value"] is False
    assert findings["leases_lost"]["value"] == 1
    assert findings["leases_lost"]["evidence"] == [expected[3]]  # job_failed
    assert findings["retries"]["value"] == 1
    assert findings["retries"]["evidence"] == [expected[4]]  # job_retry_scheduled
    assert findings["time_to_first_lease_s"]["value"] == 0.0
    assert findings["time_to_first_lease_s"]["evidence"] == [expected[1], expected[2]]
    for finding in findings.values():
        assert all(item == expected[item["version"]] for item in finding["evidence"])


def test_diagnose_of_an_unknown_job_is_one_error_line(run: Run, db_url: str) -> None:
    """diagnose of an id with no job (or of a job type's stream) is job.not_found, exit 1."""
    _expired_pair(db_url)
    assert_one_error_line(
        run("diagnose", MISSING_JOB), f"error: job.not_found: no job {MISSING_JOB}"
    )
    type_stream = str(job_type_stream_id("send_email"))
    assert_one_error_line(run("diagnose", type_stream, "--json"), "error: job.not_found: no job")


def test_diagnose_of_a_malformed_job_id_is_a_usage_error(run: Run) -> None:
    """diagnose of text that is not a UUID is a command-line error, exit 2."""
    assert_one_error_line(
        run("diagnose", "not-a-uuid", "--json"),
        "error: Invalid value for 'JOB': 'not-a-uuid' is not a job id (a UUID)",
        2,
    )
