"""Sync state, dead-job pruning and ``ledger.sources.sync`` on both backends.

Complements ``test_views.py`` (which pins the single-result cases) with multi-step histories,
per-subject isolation, and the source diff enqueued end to end.
"""

from __future__ import annotations

from datetime import timedelta
from uuid import UUID

import pytest

from ledger import (
    DefinitionNotFoundError,
    Failure,
    FailureKind,
    FakeClock,
    InvalidRequestError,
    JobStatus,
    Ledger,
    Subject,
    SubjectOp,
)
from ledger.core.source_diff import SourceAction
from ledger.core.state import JobState

PERMANENT = Failure(kind=FailureKind.TERMINAL, code="doc.missing", message="File does not exist")
RETRYABLE = Failure(kind=FailureKind.RETRYABLE, code="net.down", message="try later")


def subject(uri: str, op: SubjectOp = SubjectOp.UPSERT, *, source: str = "src") -> Subject:
    return Subject(source_id=source, uri=uri, op=op)


def succeed_next(
    ledger: Ledger, *, revision: str | None = None, content_hash: str | None = None
) -> JobState:
    """Claim the one due job and record its success with the given result."""
    [job] = ledger.claim("w")
    assert job.lease is not None
    return ledger.succeed(job.lease, revision=revision, content_hash=content_hash)


def run(
    ledger: Ledger,
    uri: str,
    op: SubjectOp = SubjectOp.UPSERT,
    *,
    source: str = "src",
    revision: str | None = None,
    content_hash: str | None = None,
) -> JobState:
    """Enqueue a subject job and run it to success with the given result."""
    assert ledger.enqueue("t", subject=subject(uri, op, source=source)).outcome != "skipped"
    return succeed_next(ledger, revision=revision, content_hash=content_hash)


def kill(
    ledger: Ledger, uri: str, op: SubjectOp = SubjectOp.UPSERT, *, source: str = "src"
) -> UUID:
    """Enqueue a subject job and dead-letter it with a permanent failure."""
    job_id = ledger.enqueue("t", subject=subject(uri, op, source=source)).job_id
    assert job_id is not None
    [job] = ledger.claim("w")
    assert job.job_id == job_id and job.lease is not None
    ledger.fail(job.lease, PERMANENT)
    return job_id


def work_all(ledger: Ledger) -> list[JobState]:
    """Run every due job to success, reporting the subject's revision as the result's."""
    done = []
    for job in ledger.claim("w", limit=100):
        assert job.lease is not None and job.subject is not None
        done.append(
            ledger.succeed(
                job.lease, revision=job.subject.revision, content_hash=f"h:{job.subject.uri}"
            )
        )
    return done


# --- the sync-state view -------------------------------------------------------------------


def test_an_upsert_never_erases_across_several_results(defined: Ledger, clock: FakeClock) -> None:
    """Each result overwrites only the values it carries; the rest survive every later one."""
    results = [("e1", "m1"), (None, None), ("e2", None), (None, "m3"), (None, None)]
    for revision, content_hash in results:
        clock.advance(1)
        run(defined, "a", revision=revision, content_hash=content_hash)
    [row] = defined.sources.sync_state("src")
    assert (row.revision, row.content_hash) == ("e2", "m3")
    assert row.last_ingested_at == row.last_seen_at == clock.now()


def test_the_row_takes_the_results_revision_never_the_jobs(defined: Ledger) -> None:
    """A job asked to sync revision e0 whose result reports none leaves the row revisionless."""
    requested = Subject(source_id="src", uri="a", revision="e0")
    assert defined.enqueue("t", subject=requested).outcome != "skipped"
    succeed_next(defined, content_hash="m")
    [row] = defined.sources.sync_state("src")
    assert (row.revision, row.content_hash) == (None, "m")
    assert defined.sources.revision_snapshot("src") == {}
    assert defined.sources.known_uris("src") == {"a"}


def test_times_are_the_clocks_at_success_and_move_only_for_the_uri_ingested(
    defined: Ledger, clock: FakeClock
) -> None:
    """last_seen/last_ingested are the success's time, not enqueue's or claim's."""
    start = clock.now()
    assert defined.enqueue("t", subject=subject("a")).outcome != "skipped"
    clock.advance(5)
    [job] = defined.claim("w")
    assert job.lease is not None
    clock.advance(5)
    defined.succeed(job.lease, revision="e1")
    clock.advance(60)
    run(defined, "b", revision="e1")
    clock.advance(60)
    run(defined, "a", revision="e2")
    rows = {row.uri: row for row in defined.sources.sync_state("src")}
    assert rows["a"].last_seen_at == rows["a"].last_ingested_at == clock.now()
    assert rows["b"].last_seen_at == rows["b"].last_ingested_at == start + timedelta(seconds=70)


def test_sync_state_and_its_reads_are_per_source(defined: Ledger) -> None:
    """Snapshot, known URIs and deletes never cross sources, even for the same URI."""
    run(defined, "a", revision="e1")
    run(defined, "a", source="other", revision="o1")
    run(defined, "b", source="other")
    assert defined.sources.revision_snapshot("src") == {"a": "e1"}
    assert defined.sources.revision_snapshot("other") == {"a": "o1"}
    assert defined.sources.known_uris("other") == {"a", "b"}
    run(defined, "a", SubjectOp.DELETE)
    assert defined.sources.sync_state("src") == []
    assert defined.sources.known_uris("other") == {"a", "b"}
    assert (
        defined.sources.known_uris("nobody") == set()
        and defined.sources.revision_snapshot("nobody") == {}
    )


def test_a_delete_prunes_only_that_subjects_dead_jobs_whatever_their_op(defined: Ledger) -> None:
    """Dead upserts and deletes of the subject go; another URI's or source's stay."""
    dead_upsert = kill(defined, "a")
    dead_delete = kill(defined, "a", SubjectOp.DELETE)
    other_uri = kill(defined, "b")
    other_source = kill(defined, "a", source="other")
    run(defined, "a", SubjectOp.DELETE)
    assert {d.job_id for d in defined.dead_letters()} == {other_uri, other_source}
    for job_id in (dead_upsert, dead_delete):
        state = defined.get(job_id)
        assert state is not None and state.status is JobStatus.DEAD


def test_a_delete_of_an_unknown_uri_succeeds_without_creating_a_row(defined: Ledger) -> None:
    """Deleting what was never ingested is a success that writes no sync state."""
    dead = kill(defined, "gone")
    state = run(defined, "gone", SubjectOp.DELETE)
    assert state.status is JobStatus.SUCCEEDED
    assert defined.sources.sync_state("src") == []
    assert dead not in {d.job_id for d in defined.dead_letters()}


def test_failures_write_no_sync_state_and_prune_nothing(defined: Ledger) -> None:
    """A retried or dead delete keeps the row and every dead job of the subject."""
    run(defined, "a", revision="e1", content_hash="m1")
    dead_upsert = kill(defined, "a")
    assert defined.enqueue("t", subject=subject("a", SubjectOp.DELETE)).outcome != "skipped"
    [job] = defined.claim("w")
    assert job.lease is not None
    retried = defined.fail(job.lease, RETRYABLE)
    assert retried.status is JobStatus.PENDING
    assert defined.sources.revision_snapshot("src") == {"a": "e1"}
    defined.cancel(job.job_id)
    dead_delete = kill(defined, "a", SubjectOp.DELETE)
    [row] = defined.sources.sync_state("src")
    assert (row.revision, row.content_hash) == ("e1", "m1")
    assert {d.job_id for d in defined.dead_letters()} == {dead_upsert, dead_delete}


def test_a_pruned_dead_job_can_still_be_requeued(defined: Ledger) -> None:
    """Pruning leaves the job dead in the queue: an operator may still give it a new run."""
    dead = kill(defined, "a")
    run(defined, "a", SubjectOp.DELETE)
    assert defined.dead_letters() == []
    state = defined.requeue(dead)
    assert (state.status, state.run_number) == (JobStatus.PENDING, 2)
    assert defined.dead_letters() == []


def test_dead_letters_come_oldest_death_first_and_filter_by_type(
    defined: Ledger, clock: FakeClock
) -> None:
    """The view lists by death time, whatever the enqueue order, and --type narrows it."""
    defined.define("u")
    first = defined.enqueue("t").job_id
    second = defined.enqueue("u").job_id
    assert first is not None and second is not None
    for job_id, job_type in ((second, "u"), (first, "t")):
        clock.advance(1)
        [job] = defined.claim("w", types=[job_type])
        assert job.job_id == job_id and job.lease is not None
        defined.fail(job.lease, PERMANENT)
    letters = defined.dead_letters()
    assert [d.job_id for d in letters] == [second, first]
    assert letters[0].dead_at < letters[1].dead_at
    assert [d.job_id for d in defined.dead_letters("t")] == [first]


# --- sync_source ---------------------------------------------------------------------------


def seed_state(ledger: Ledger) -> None:
    """src knows a (e1), b (e1), c (no revision) and d (e1)."""
    run(ledger, "a", revision="e1")
    run(ledger, "b", revision="e1")
    run(ledger, "c", content_hash="m")
    run(ledger, "d", revision="e1")


def test_sync_source_enqueues_one_job_per_upsert_and_delete(defined: Ledger) -> None:
    """Changed and new URIs become upserts carrying the listed revision; missing ones, deletes."""
    seed_state(defined)
    listing = [("a", "e1"), ("b", "e2"), ("c", None), ("n", "e9")]
    synced = defined.sources.sync("src", listing, job_type="t", org="acme")
    assert [d.uri for d in synced.diff.unchanged] == ["a", "c"]
    assert synced.skipped == []
    assert [(j.decision.uri, j.decision.action) for j in synced.enqueued] == [
        ("b", SourceAction.UPSERT),
        ("n", SourceAction.UPSERT),
        ("d", SourceAction.DELETE),
    ]
    jobs = defined.get_many([j.job_id for j in synced.enqueued])
    subjects = [jobs[j.job_id].subject for j in synced.enqueued]
    assert subjects == [
        Subject(source_id="src", uri="b", op=SubjectOp.UPSERT, revision="e2"),
        Subject(source_id="src", uri="n", op=SubjectOp.UPSERT, revision="e9"),
        Subject(source_id="src", uri="d", op=SubjectOp.DELETE),
    ]
    for job in jobs.values():
        assert (job.job_type, job.org, job.payload, job.status) == ("t", "acme", {}, "pending")


def test_sync_source_skips_subjects_that_have_a_live_job(defined: Ledger) -> None:
    """A live job of either op blocks the subject's change; it is reported, not enqueued."""
    seed_state(defined)
    pending_upsert = defined.enqueue("t", subject=subject("n")).job_id
    live_upsert = defined.enqueue("t", subject=subject("d")).job_id
    [leased] = defined.claim("w")
    assert leased.job_id == pending_upsert and live_upsert is not None
    synced = defined.sources.sync(
        "src", [("a", "e1"), ("b", "e2"), ("c", None), ("n", "e9")], job_type="t"
    )
    assert [j.decision.uri for j in synced.enqueued] == ["b"]
    assert [(d.uri, d.action) for d in synced.skipped] == [
        ("n", SourceAction.UPSERT),
        ("d", SourceAction.DELETE),
    ]
    assert defined.counts() == {"succeeded": 4, "leased": 1, "pending": 2}


def test_a_second_identical_sync_after_the_jobs_succeeded_enqueues_nothing(
    defined: Ledger,
) -> None:
    """Once the enqueued jobs ran, the same listing diffs as unchanged everywhere."""
    seed_state(defined)
    listing = [("a", "e1"), ("b", "e2"), ("c", None), ("n", "e9")]
    first = defined.sources.sync("src", listing, job_type="t")
    assert len(work_all(defined)) == len(first.enqueued) == 3
    assert defined.sources.revision_snapshot("src") == {"a": "e1", "b": "e2", "n": "e9"}
    assert defined.sources.known_uris("src") == {"a", "b", "c", "n"}
    head = defined.store.head_position()
    second = defined.sources.sync("src", listing, job_type="t")
    assert (second.enqueued, second.skipped, second.diff.changes) == ([], [], [])
    assert [d.uri for d in second.diff.unchanged] == ["a", "b", "c", "n"]
    assert defined.store.head_position() == head


def test_a_second_sync_before_the_jobs_ran_skips_every_change(defined: Ledger) -> None:
    """Re-polling while the jobs are still pending enqueues no duplicates."""
    seed_state(defined)
    listing = [("b", "e2"), ("n", "e9")]
    first = defined.sources.sync("src", listing, job_type="t")
    second = defined.sources.sync("src", listing, job_type="t")
    assert second.enqueued == []
    assert [d.uri for d in second.skipped] == [j.decision.uri for j in first.enqueued]


def test_a_revisionless_source_is_ingested_once_per_appearance(defined: Ledger) -> None:
    """No revision: new → upsert, then unchanged; gone → delete; back again → new upsert."""
    [job] = defined.sources.sync("src", [("a", None)], job_type="t").enqueued
    assert job.decision.is_new
    work_all(defined)
    again = defined.sources.sync("src", [("a", None)], job_type="t")
    assert again.enqueued == [] and [d.uri for d in again.diff.unchanged] == ["a"]
    [gone] = defined.sources.sync("src", [], job_type="t").enqueued
    assert gone.decision.action is SourceAction.DELETE
    work_all(defined)
    assert defined.sources.known_uris("src") == set()
    [back] = defined.sources.sync("src", [("a", None)], job_type="t").enqueued
    assert back.decision.is_new


@pytest.mark.parametrize("fault", ["unknown type", "duplicate uri"])
def test_a_refused_sync_appends_nothing(defined: Ledger, fault: str) -> None:
    """An unknown job type or a URI listed twice fails the whole sync before any enqueue."""
    seed_state(defined)
    head = defined.store.head_position()
    if fault == "unknown type":
        with pytest.raises(DefinitionNotFoundError):
            defined.sources.sync("src", [("b", "e2"), ("n", "e9")], job_type="nope")
    else:
        with pytest.raises(InvalidRequestError, match="more than once"):
            defined.sources.sync("src", [("n", "e9"), ("n", "e9")], job_type="t")
    assert defined.store.head_position() == head
