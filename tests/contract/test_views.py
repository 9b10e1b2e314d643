"""Inline sync-state and dead-letter views, and the jobs-available signal, on both backends."""

from __future__ import annotations

import psycopg

from ledger import Failure, FailureKind, FakeClock, Ledger, Subject, SubjectOp
from ledger.core.state import JobState

PERMANENT = Failure(kind=FailureKind.TERMINAL, code="doc.missing", message="File does not exist")


def run_subject_job(
    ledger: Ledger, op: SubjectOp, *, revision: str | None = None, content_hash: str | None = None
) -> JobState:
    job_id = ledger.enqueue("t", subject=Subject(source_id="src", uri="file:///a.md", op=op)).job_id
    [job] = ledger.claim("w")
    assert job.job_id == job_id and job.lease is not None
    return ledger.succeed(job.lease, revision=revision, content_hash=content_hash)


def test_success_records_the_results_revision_and_hash(defined: Ledger, clock: FakeClock) -> None:
    """An upsert's result revision and hash land in the sync state, with its times."""
    run_subject_job(defined, SubjectOp.UPSERT, revision="e1", content_hash="m1")
    [row] = defined.sources.sync_state("src")
    assert (row.uri, row.revision, row.content_hash) == ("file:///a.md", "e1", "m1")
    assert row.last_ingested_at == clock.now() == row.last_seen_at
    assert defined.sources.revision_snapshot("src") == {"file:///a.md": "e1"}
    assert defined.sources.known_uris("src") == {"file:///a.md"}


def test_an_upsert_never_erases_a_stored_value(defined: Ledger, clock: FakeClock) -> None:
    """A result without a revision or hash keeps the stored ones."""
    run_subject_job(defined, SubjectOp.UPSERT, revision="e1", content_hash="m1")
    clock.advance(5)
    run_subject_job(defined, SubjectOp.UPSERT, content_hash="m2")
    [row] = defined.sources.sync_state("src")
    assert (row.revision, row.content_hash) == ("e1", "m2")
    assert row.last_ingested_at == clock.now()


def test_a_row_without_a_revision_is_known_but_not_in_the_snapshot(defined: Ledger) -> None:
    """revision_snapshot lists only rows with a revision; known_uris lists every row."""
    run_subject_job(defined, SubjectOp.UPSERT, content_hash="m")
    assert defined.sources.revision_snapshot("src") == {}
    assert defined.sources.known_uris("src") == {"file:///a.md"}


def test_dead_letters_keep_payload_and_checkpoint_and_leave_on_requeue(defined: Ledger) -> None:
    """A dead job is in the view with its snapshot; requeue takes it out."""
    job_id = defined.enqueue("t", {"doc": 7}).job_id
    assert job_id is not None
    [job] = defined.claim("w")
    assert job.lease is not None
    defined.progress(job.lease, checkpoint={"page": 4})
    defined.fail(job.lease, PERMANENT)
    [letter] = defined.dead_letters()
    assert (letter.job_id, letter.job_type, letter.failure) == (job_id, "t", PERMANENT)
    assert letter.snapshot.payload == {"doc": 7} and letter.snapshot.checkpoint == {"page": 4}
    assert defined.dead_letters("other") == []
    defined.requeue(job_id)
    assert defined.dead_letters() == []


def test_a_successful_delete_removes_the_row_and_prunes_the_subjects_dead_jobs(
    defined: Ledger,
) -> None:
    """Once a delete resolves a URI, earlier dead jobs for it leave the dead-letter view."""
    run_subject_job(defined, SubjectOp.UPSERT, revision="e1")
    dead_id = defined.enqueue("t", subject=Subject(source_id="src", uri="file:///a.md")).job_id
    [job] = defined.claim("w")
    assert job.lease is not None
    defined.fail(job.lease, PERMANENT)
    other = defined.enqueue("t", {"unrelated": True}).job_id
    [job] = defined.claim("w")
    assert job.job_id == other and job.lease is not None
    defined.fail(job.lease, PERMANENT)
    assert {d.job_id for d in defined.dead_letters()} == {dead_id, other}
    run_subject_job(defined, SubjectOp.DELETE)
    assert defined.sources.sync_state("src") == []
    assert [d.job_id for d in defined.dead_letters()] == [other]
    assert dead_id is not None
    dead = defined.get(dead_id)
    assert dead is not None and dead.status == "dead"  # history and queue row stay


def test_listeners_hear_commits_that_may_make_jobs_claimable(defined: Ledger) -> None:
    """enqueue, retry and release signal; a heartbeat or success does not."""
    heard: list[int] = []
    defined.on_jobs_available(lambda: heard.append(defined.store.head_position()))
    defined.enqueue("t")
    assert len(heard) == 1
    [job] = defined.claim("w")
    assert job.lease is not None
    defined.heartbeat(job.lease)
    assert len(heard) == 1
    defined.release(job.lease)
    assert len(heard) == 2
    [job] = defined.claim("w")
    assert job.lease is not None
    defined.succeed(job.lease)
    assert len(heard) == 2


def test_postgres_notifies_other_sessions_once_per_transaction(pg_url: str) -> None:
    """A LISTEN session gets one jl_jobs_available per enqueue transaction, not per job."""
    from ledger import EnqueueRequest

    with psycopg.connect(pg_url, autocommit=True) as listener, Ledger.open(pg_url) as ledger:
        listener.execute("LISTEN jl_jobs_available")
        ledger.define("t")
        ledger.enqueue_many([EnqueueRequest(job_type="t") for _ in range(20)])
        received = list(listener.notifies(timeout=2.0, stop_after=5))
    assert [n.channel for n in received] == ["jl_jobs_available"]
