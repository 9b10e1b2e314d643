"""``jobledger sync-state`` and ``jobledger dlq [requeue]`` against real databases."""

from __future__ import annotations

import json
from uuid import UUID

import pytest
from cli_helpers import Run, assert_one_error_line, event_count

from ledger import Failure, FailureKind, FakeClock, JobStatus, Ledger, Subject, SubjectOp
from ledger.core.events import JobRequeued

SOME_ID = "0b7c0e8e-2b8f-4a53-9c8e-3f1d2c556a11"
PERMANENT = Failure(kind=FailureKind.TERMINAL, code="doc.missing", message="File does not exist")


def _ledger(url: str, clock: FakeClock) -> Ledger:
    ledger = Ledger.open(url, clock=clock)
    if ledger.definition("ingest") is None:
        ledger.define("ingest")
        ledger.define("resize")
    return ledger


def _ingest(url: str, clock: FakeClock) -> None:
    """src: a.md ingested with revision and hash; b.md with a hash only, 90 s later."""
    with _ledger(url, clock) as ledger:
        for uri, revision in (("file:///a.md", "e1"), ("file:///b.md", None)):
            ledger.enqueue("ingest", subject=Subject(source_id="src", uri=uri))
            [job] = ledger.claim("w")
            assert job.lease is not None
            ledger.succeed(job.lease, revision=revision, content_hash=f"md5-{uri[-4]}")
            clock.advance(90)


def _kill(
    url: str,
    clock: FakeClock,
    job_type: str = "ingest",
    *,
    uri: str | None = "file:///gone.md",
    payload: dict[str, object] | None = None,
) -> UUID:
    """Enqueue a job and dead-letter it on its first attempt, one second later."""
    with _ledger(url, clock) as ledger:
        subject = None if uri is None else Subject(source_id="src", uri=uri)
        job_id = ledger.enqueue(job_type, payload or {}, subject=subject, org="acme").job_id
        assert job_id is not None
        [job] = ledger.claim("w", types=[job_type])
        assert job.job_id == job_id and job.lease is not None
        ledger.progress(job.lease, checkpoint={"page": 3})
        clock.advance(1)
        ledger.fail(job.lease, PERMANENT)
    return job_id


def _status(url: str, job_id: UUID) -> tuple[JobStatus, int]:
    with Ledger.open(url) as ledger:
        state = ledger.get(job_id)
    assert state is not None
    return state.status, state.run_number


# --- sync-state ------------------------------------------------------------------------------


def test_sync_state_lists_the_sources_rows(run: Run, db_url: str, clock: FakeClock) -> None:
    """One aligned row per URI: revision, hash, last seen and ingested; '-' when unset."""
    _ingest(db_url, clock)
    result = run("sync-state", "src")
    assert result.exit_code == 0, result.stderr
    assert result.stdout == (
        "URI           REVISION  CONTENT HASH  LAST SEEN                 LAST INGESTED\n"
        "file:///a.md  e1        md5-a         2026-01-01T00:00:00.000Z  2026-01-01T00:00:00.000Z\n"
        "file:///b.md  -         md5-b         2026-01-01T00:01:30.000Z  2026-01-01T00:01:30.000Z\n"
    )


def test_sync_state_json_keeps_every_field(run: Run, db_url: str, clock: FakeClock) -> None:
    """--json prints every row with every field, nulls included."""
    _ingest(db_url, clock)
    result = run("sync-state", "src", "--json")
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)[1] == {
        "source_id": "src",
        "uri": "file:///b.md",
        "revision": None,
        "content_hash": "md5-b",
        "last_seen_at": "2026-01-01T00:01:30Z",
        "last_ingested_at": "2026-01-01T00:01:30Z",
    }


def test_sync_state_of_an_unknown_source_is_empty_not_an_error(run: Run) -> None:
    """A source with no rows says so (text) or prints [] (JSON), exit 0."""
    text, as_json = run("sync-state", "nope"), run("sync-state", "nope", "--json")
    assert (text.exit_code, as_json.exit_code) == (0, 0)
    assert text.stdout == "no sync state for source 'nope'\n"
    assert json.loads(as_json.stdout) == []


# --- dlq -------------------------------------------------------------------------------------


def test_dlq_lists_dead_jobs_oldest_first(run: Run, db_url: str, clock: FakeClock) -> None:
    """Text: job, type, org, subject, death time, failure, run, attempts, payload preview."""
    first = _kill(db_url, clock, payload={"doc": 7})
    second = _kill(db_url, clock, "resize", uri=None, payload={"big": "x" * 300})
    result = run("dlq")
    assert result.exit_code == 0, result.stderr
    header, row1, row2 = result.stdout.splitlines()
    assert header.split() == [
        "JOB", "TYPE", "ORG", "SUBJECT", "DEAD", "AT", "FAILURE", "RUN", "ATTEMPTS", "PAYLOAD",
    ]  # fmt: skip
    assert row1.split() == [
        str(first), "ingest", "acme", "upsert", "src", "file:///gone.md",
        "2026-01-01T00:00:01.000Z", "doc.missing:", "File", "does", "not", "exist", "1", "1/8",
        '{"doc":7}',
    ]  # fmt: skip
    assert row2.startswith(str(second)) and " resize " in row2 and " - " in row2
    assert row2.endswith("…") and len(row2.split()[-1]) == 200


def test_dlq_json_and_type_filter(run: Run, db_url: str, clock: FakeClock) -> None:
    """--json prints each dead job whole; --type keeps one type; no match is not an error."""
    dead = _kill(db_url, clock, payload={"doc": 7})
    _kill(db_url, clock, "resize", uri=None)
    result = run("dlq", "--type", "ingest", "--json")
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout) == [
        {
            "job_id": str(dead),
            "job_type": "ingest",
            "org": "acme",
            "subject": {
                "source_id": "src",
                "uri": "file:///gone.md",
                "op": "upsert",
                "revision": None,
            },
            "dead_at": "2026-01-01T00:00:01Z",
            "failure": {
                "kind": "terminal",
                "code": "doc.missing",
                "message": "File does not exist",
            },
            "run_number": 1,
            "attempt": 1,
            "max_attempts": 8,
            "payload": {"doc": 7},
            "checkpoint": {"page": 3},
        }
    ]
    assert run("dlq", "--type", "nope").stdout == "no dead jobs of type 'nope'\n"
    assert json.loads(run("dlq", "--type", "nope", "--json").stdout) == []


def test_dlq_on_an_empty_ledger_says_so(run: Run) -> None:
    """No dead jobs: a sentence, exit 0."""
    result = run("dlq")
    assert (result.exit_code, result.stdout) == (0, "no dead jobs\n")


def test_a_successful_delete_takes_the_subjects_dead_jobs_off_the_dlq(
    run: Run, db_url: str, clock: FakeClock
) -> None:
    """The prune is visible to operators: dlq no longer lists the stale dead upsert."""
    _kill(db_url, clock)
    with _ledger(db_url, clock) as ledger:
        subject = Subject(source_id="src", uri="file:///gone.md", op=SubjectOp.DELETE)
        ledger.enqueue("ingest", subject=subject)
        [job] = ledger.claim("w")
        assert job.lease is not None
        ledger.succeed(job.lease)
    assert run("dlq").stdout == "no dead jobs\n"


# --- dlq requeue -----------------------------------------------------------------------------


def test_requeue_one_job_starts_a_new_run_with_the_reason(
    run: Run, db_url: str, clock: FakeClock
) -> None:
    """requeue JOB prints the new run; the reason lands in the job_requeued event."""
    dead = _kill(db_url, clock)
    result = run("dlq", "requeue", str(dead), "--reason", "fixed the bucket")
    assert result.exit_code == 0, result.stderr
    assert result.stdout == f"requeued {dead} (run 2)\n"
    assert _status(db_url, dead) == (JobStatus.PENDING, 2)
    with Ledger.open(db_url) as ledger:
        requeued = ledger.history(dead)[-1].event
        assert isinstance(requeued, JobRequeued) and requeued.reason == "fixed the bucket"
        assert ledger.dead_letters() == []


def test_requeue_one_job_json(run: Run, db_url: str, clock: FakeClock) -> None:
    """--json reports the same shape as --all: requeued and refused lists."""
    dead = _kill(db_url, clock)
    result = run("dlq", "requeue", str(dead), "--json")
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout) == {
        "requeued": [{"job_id": str(dead), "job_type": "ingest", "run_number": 2}],
        "refused": [],
    }


@pytest.mark.parametrize("as_json", [False, True])
def test_requeue_of_a_job_that_is_not_dead_is_one_error_line(
    run: Run, db_url: str, clock: FakeClock, as_json: bool
) -> None:
    """A refusal of JOB is the command's error: its code, exit 1, nothing appended."""
    dead = _kill(db_url, clock)
    assert run("dlq", "requeue", str(dead)).exit_code == 0
    before = event_count(db_url)
    result = run("dlq", "requeue", str(dead), *(["--json"] if as_json else []))
    assert_one_error_line(result, f"error: job.invalid_transition: job {dead} is pending")
    assert event_count(db_url) == before


def test_requeue_of_an_unknown_job_is_job_not_found(run: Run) -> None:
    """An id with no job: job.not_found, exit 1."""
    result = run("dlq", "requeue", SOME_ID)
    assert_one_error_line(result, f"error: job.not_found: no job {SOME_ID}")


def test_requeue_all_reports_each_job_and_fails_if_any_was_refused(
    run: Run, db_url: str, clock: FakeClock
) -> None:
    """Two dead jobs of one subject: the first is requeued, the second refused (live subject)."""
    first = _kill(db_url, clock)
    second = _kill(db_url, clock)
    result = run("dlq", "requeue", "--all")
    assert result.exit_code == 1
    assert result.stderr == "error: 1 of 2 dead job(s) refused requeue\n"
    summary, header, requeued, refused = result.stdout.splitlines()
    assert summary == "requeued 1 of 2 dead job(s), 1 refused"
    assert header.split() == ["JOB", "TYPE", "OUTCOME", "DETAIL"]
    assert requeued.split() == [str(first), "ingest", "requeued", "run", "2"]
    assert refused.split()[:4] == [str(second), "ingest", "refused", "job.invalid_transition:"]
    assert f"subject has a live job, {first}" in refused
    assert _status(db_url, first) == (JobStatus.PENDING, 2)
    assert _status(db_url, second) == (JobStatus.DEAD, 1)


def test_requeue_all_json_carries_each_refusals_code(
    run: Run, db_url: str, clock: FakeClock
) -> None:
    """--json: stdout stays one valid document, the error line goes to stderr, exit 1."""
    first = _kill(db_url, clock)
    second = _kill(db_url, clock)
    result = run("dlq", "requeue", "--all", "--json")
    assert result.exit_code == 1
    assert result.stderr == "error: 1 of 2 dead job(s) refused requeue\n"
    report = json.loads(result.stdout)
    assert report["requeued"] == [{"job_id": str(first), "job_type": "ingest", "run_number": 2}]
    [refusal] = report["refused"]
    assert (refusal["job_id"], refusal["code"]) == (str(second), "job.invalid_transition")


def test_requeue_all_of_one_type(run: Run, db_url: str, clock: FakeClock) -> None:
    """--all --type requeues only that type's dead jobs; none left is exit 0 with a note."""
    ingest = _kill(db_url, clock)
    resize = _kill(db_url, clock, "resize", uri=None)
    result = run("dlq", "requeue", "--all", "--type", "resize")
    assert result.exit_code == 0, result.stderr
    assert result.stdout.splitlines()[0] == "requeued 1 of 1 dead job(s), 0 refused"
    assert _status(db_url, resize) == (JobStatus.PENDING, 2)
    assert _status(db_url, ingest) == (JobStatus.DEAD, 1)
    again = run("dlq", "requeue", "--all", "--type", "resize")
    assert (again.exit_code, again.stdout) == (0, "no dead jobs of type 'resize'\n")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["dlq", "requeue"], "error: give JOB or --all"),
        (["dlq", "requeue", SOME_ID, "--all"], "error: give JOB or --all, not both"),
        (["dlq", "requeue", SOME_ID, "--type", "t"], "error: --type needs --all"),
        (["dlq", "requeue", "not-a-uuid"], "error: Invalid value for '[JOB]'"),
        (["dlq", "--json", "requeue", "--all"], "error: --type and --json go after"),
        (["dlq", "frob"], "error: No such command 'frob'"),
    ],
    ids=["neither", "both", "type without all", "bad id", "group option", "unknown subcommand"],
)
def test_dlq_usage_errors_are_one_line_and_write_nothing(
    run: Run, db_url: str, clock: FakeClock, args: list[str], message: str
) -> None:
    """A wrong command line: one error line, exit 2, nothing requeued."""
    dead = _kill(db_url, clock)
    before = event_count(db_url)
    assert_one_error_line(run(*args), message, exit_code=2)
    assert event_count(db_url) == before
    assert _status(db_url, dead) == (JobStatus.DEAD, 1)
