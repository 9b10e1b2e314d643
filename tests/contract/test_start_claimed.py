"""Handler starts recorded from the claim's states (``Ledger.start_claimed``), on both backends.

On PostgreSQL a start whose job is still at the claimed version is written by one statement
that never reads the job first (:mod:`ledger.store.postgres.unread_appends`); these pin that it
records exactly what the locked way records, writes nothing for a job that moved on, and
falls back to deciding on the stored state.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from ledger import FakeClock, JobStatus, Ledger
from ledger.core.events import JobStageChanged
from ledger.core.state import JobState
from ledger.core.values import Stage


def claimed(ledger: Ledger, n: int) -> list[JobState]:
    for i in range(n):
        ledger.enqueue("t", payload={"i": i})
    jobs = ledger.claim("w", limit=n)
    assert len(jobs) == n
    return jobs


def starts_of(ledger: Ledger, job: JobState) -> list[JobStageChanged]:
    return [r.event for r in ledger.history(job.job_id) if isinstance(r.event, JobStageChanged)]


def start_statement_parameters(ledger: Ledger, jobs: list[JobState]) -> dict[str, object]:
    """``jobs_append_if_unchanged``'s parameters for starting ``jobs`` (their claimed
    states), as the store builds them."""
    from ledger.core import decide
    from ledger.store.postgres import unread_appends

    store = ledger.store
    now = ledger.clock.now()
    changes = [(s, decide.decide_start(s, s.lease, now)) for s in jobs]  # type: ignore[arg-type]
    fold = unread_appends.rows_only_fold(changes, store.policies)
    assert fold is not None
    known = {s.job_id: s for s in jobs}
    return unread_appends.statement_parameters(fold, known, store.codec, store.ids, "jl_events")


def test_a_start_from_the_claimed_state_is_what_the_locked_start_records(
    defined: Ledger, clock: FakeClock
) -> None:
    """The same event, the same state, the same view row (verify clean) as start_many."""
    by_claim, by_lock = claimed(defined, 2)
    clock.advance(1)
    fast = defined.start_claimed([by_claim])
    assert by_lock.lease is not None
    locked = defined.start_many([by_lock.lease])
    assert not fast.rejected and not locked.rejected
    [after_fast], [after_lock] = fast.accepted, locked.accepted
    assert after_fast.stage == after_lock.stage == Stage.RUNNING
    assert after_fast.started_at == after_lock.started_at == clock.now()
    assert after_fast.version == by_claim.version + 1
    assert defined.get(by_claim.job_id) == after_fast
    [event] = starts_of(defined, by_claim)
    assert (event.stage, event.attempt, event.at) == (Stage.RUNNING, 1, clock.now())
    assert defined.projections().verify().clean


def test_a_job_that_moved_on_since_its_claim_is_started_from_its_stored_state(
    defined: Ledger, clock: FakeClock
) -> None:
    """A heartbeat after the claim: the claimed state is stale, so the job is decided again
    under its lock and started once (never twice, never from the stale state)."""
    [job] = claimed(defined, 1)
    assert job.lease is not None
    clock.advance(5)
    beat = defined.heartbeat(job.lease, lease_s=60)
    result = defined.start_claimed([job])
    assert not result.rejected
    [after] = result.accepted
    assert after.version == beat.version + 1
    assert after.lease_expires_at == beat.lease_expires_at  # the heartbeat's, kept
    assert len(starts_of(defined, job)) == 1
    assert defined.projections().verify().clean


def test_the_same_claimed_state_started_twice_appends_one_start(defined: Ledger) -> None:
    """The second write finds the job at a later version: nothing appended by it, and the
    stored state (running already) decides that there is nothing to record."""
    [job] = claimed(defined, 1)
    first = defined.start_claimed([job])
    second = defined.start_claimed([job])
    assert [s.job_id for s in first.accepted] == [job.job_id]
    assert not second.rejected and not second.accepted
    assert len(starts_of(defined, job)) == 1
    assert defined.projections().verify().clean


def test_a_job_cancelled_since_its_claim_is_refused_and_not_written(defined: Ledger) -> None:
    """The fence, on the stored state: the handler must not start; nothing appended."""
    job, other = claimed(defined, 2)
    defined.cancel(job.job_id)
    result = defined.start_claimed([job, other])
    assert set(result.rejected) == {job.job_id}
    assert [s.job_id for s in result.accepted] == [other.job_id]
    assert starts_of(defined, job) == []
    assert (defined.get(job.job_id) or job).status is JobStatus.CANCELLED
    assert defined.projections().verify().clean


@pytest.mark.parametrize("n", [1, 7])
def test_many_starts_in_one_write(defined: Ledger, n: int) -> None:
    jobs = claimed(defined, n)
    result = defined.start_claimed(jobs)
    assert sorted(s.job_id for s in result.accepted) == sorted(j.job_id for j in jobs)
    assert all((defined.get(j.job_id) or j).stage == Stage.RUNNING for j in jobs)
    assert defined.projections().verify().clean


def test_only_a_fold_that_touches_the_jobs_rows_alone_skips_the_read(defined: Ledger) -> None:
    """The one-statement write takes a start (its fold is the job's row only) and leaves a
    cancel (it wakes the leased job's pool) to the unit of work."""
    from ledger.core import decide
    from ledger.store.postgres.unread_appends import rows_only_fold

    [job] = claimed(defined, 1)
    assert job.lease is not None
    start = decide.decide_start(job, job.lease, job.updated_at)
    policies = defined.store.policies
    assert rows_only_fold([(job, start)], policies) is not None
    cancel = decide.decide_cancel(job, job.updated_at, "no longer wanted")
    assert rows_only_fold([(job, [cancel])], policies) is None


def test_a_success_skips_the_read_unless_a_workflow_must_see_it(defined: Ledger) -> None:
    """A plain job's success is its row alone; a workflow step's success is what the
    workflow policy reacts to, so it is the unit of work's."""
    import uuid

    import msgspec

    from ledger.core import decide
    from ledger.core.values import WorkflowLink
    from ledger.store.postgres.unread_appends import rows_only_fold

    [job] = claimed(defined, 1)
    assert job.lease is not None
    policies = defined.store.policies
    success = decide.decide_succeed(job, job.lease, job.updated_at)
    assert rows_only_fold([(job, [success])], policies) is not None
    step = msgspec.structs.replace(job, workflow=WorkflowLink(uuid.uuid4(), "a"))
    assert (
        rows_only_fold([(step, [decide.decide_succeed(step, job.lease, job.updated_at)])], policies)
        is None
    )


def test_outcomes_from_the_started_states_are_what_finish_many_records(
    defined: Ledger, clock: FakeClock
) -> None:
    """A success and a retried failure decided on the states the starts returned: the same
    states as finish_many's from the locked rows; a job heartbeated since its start is read
    and decided on its stored state; an unknown state (``None``) likewise."""
    from ledger import Completion, Failure, FailureKind, FailureReport

    jobs = claimed(defined, 6)
    started = {s.job_id: s for s in defined.start_claimed(jobs).accepted}
    a, b, c, d, e, f = (started[j.job_id] for j in jobs)
    for state in (a, b, c, d, e, f):
        assert state.lease is not None
    clock.advance(2)
    beat = defined.heartbeat(c.lease, lease_s=60)  # type: ignore[arg-type]
    blip = Failure(kind=FailureKind.RETRYABLE, code="down", message="blip")
    fast = defined.finish_claimed(
        [
            (a, Completion(a.lease, output={"n": 1})),  # type: ignore[arg-type]
            (b, FailureReport(b.lease, blip)),  # type: ignore[arg-type]
            (c, Completion(c.lease)),  # type: ignore[arg-type]
            (None, Completion(d.lease)),  # type: ignore[arg-type]
        ]
    )
    locked = defined.finish_many(
        [Completion(e.lease, output={"n": 1}), FailureReport(f.lease, blip)]  # type: ignore[arg-type]
    )
    assert not fast.rejected and not locked.rejected
    after = {s.job_id: s for s in [*fast.accepted, *locked.accepted]}
    assert after[a.job_id].status is JobStatus.SUCCEEDED and after[a.job_id].output == {"n": 1}
    assert after[b.job_id].status is after[f.job_id].status
    assert after[b.job_id].run_at == after[f.job_id].run_at  # the same jitter-free backoff
    assert after[c.job_id].version == beat.version + 1
    assert after[d.job_id].status is JobStatus.SUCCEEDED
    for job_id, state in after.items():
        assert defined.get(job_id) == state
    assert defined.projections().verify().clean


def test_an_outcome_of_a_job_cancelled_since_its_start_records_how_the_handler_stopped(
    defined: Ledger,
) -> None:
    """The stored state (cancelled) decides, as finish_many's does: job_handler_stopped."""
    from ledger import Completion
    from ledger.core.events import JobHandlerStopped

    [job] = claimed(defined, 1)
    [running] = defined.start_claimed([job]).accepted
    defined.cancel(job.job_id)
    assert running.lease is not None
    result = defined.finish_claimed([(running, Completion(running.lease))])
    assert not result.rejected
    kinds = [type(r.event) for r in defined.history(job.job_id)]
    assert kinds[-1] is JobHandlerStopped
    assert defined.projections().verify().clean


def test_starts_and_outcomes_in_one_write_are_told_apart(defined: Ledger) -> None:
    """The pool's start write carries the gathered outcomes: each part's result names its
    own jobs only, a refused start among them (cancelled) included."""
    from ledger import Completion

    done, starting, cancelled = claimed(defined, 3)
    [running] = defined.start_claimed([done]).accepted
    defined.cancel(cancelled.job_id)
    assert running.lease is not None
    started, finished = defined.start_and_finish_claimed(
        [starting, cancelled], [(running, Completion(running.lease, output=1))]
    )
    assert [s.job_id for s in started.accepted] == [starting.job_id]
    assert set(started.rejected) == {cancelled.job_id}
    assert [s.job_id for s in finished.accepted] == [done.job_id]
    assert not finished.rejected
    assert finished.accepted[0].status is JobStatus.SUCCEEDED
    assert defined.projections().verify().clean


def test_the_one_statement_finds_its_rows_by_key_not_by_scanning_the_queue(pg_url: str) -> None:
    """Joined to the JSON rows, the planner hashed every row of every month to lock a few
    (a seq scan per partition: a cost that grows with the history); by primary key it
    reads only the rows it writes."""
    import json

    import psycopg

    from ledger import EnqueueRequest

    with Ledger.open(pg_url) as ledger:
        ledger.define("t")
        ledger.enqueue_many([EnqueueRequest(job_type="t", payload={"i": i}) for i in range(3000)])
        params = start_statement_parameters(ledger, ledger.claim("w", limit=2))
        sql = ledger.store.sql["jobs_append_if_unchanged"]  # type: ignore[attr-defined]
        with psycopg.connect(pg_url) as conn:
            [(plan,)] = conn.execute("EXPLAIN (FORMAT JSON) " + sql, params).fetchall()
            conn.rollback()
    text = json.dumps(plan)
    assert "Seq Scan" not in text, text


def test_the_one_statement_keeps_its_generic_plan_on_a_ledger_of_many_months(
    empty_pg_url: str,
) -> None:
    """Run after run, the server keeps the statement's generic plan instead of planning it
    afresh at every call. With the ids given as a constant array, a custom plan pruned the
    job view to their months at planning time and so looked cheaper than the generic plan
    over every month: on a ledger of 17 month partitions the server planned every call
    again (~0.8 ms each; bench/README.md, "Cost flat in the history"). The generic plan
    prunes the same months when it runs."""
    import psycopg

    from ledger import EnqueueRequest
    from ledger.clock import FakeClock
    from ledger.jobs.outcomes import Completion
    from ledger.store.postgres import unread_appends

    clock = FakeClock(datetime(2025, 12, 1, tzinfo=UTC))
    with Ledger.open(empty_pg_url, create=True, clock=clock) as ledger:
        ledger.define("t")
        for year, month in [(2025, 12), *((2026, m) for m in range(1, 12))]:
            clock.set(datetime(year, month, 15, tzinfo=UTC))  # a year, a partition a month
            ledger.store.ensure_partitions(clock.now())  # type: ignore[attr-defined]
            ledger.enqueue_many([EnqueueRequest("t", {"i": i}) for i in range(100)])
            while claimed := ledger.claim("filler", limit=100):
                ledger.finish_claimed([(s, Completion(s.lease)) for s in claimed if s.lease])
        ledger.enqueue_many([EnqueueRequest("t", {"i": i}) for i in range(100)])
        store = ledger.store
        sql = store.sql["jobs_append_if_unchanged"]  # type: ignore[attr-defined]
        with psycopg.connect(empty_pg_url, autocommit=True) as conn:
            conn.execute("ANALYZE")
            with conn.cursor(row_factory=psycopg.rows.dict_row) as cursor:
                for _ in range(10):
                    jobs = ledger.claim("w", limit=5)
                    params = start_statement_parameters(ledger, jobs)
                    written = unread_appends.run(cursor, sql, params)
                    assert written == {s.job_id for s in jobs}
            [(partitions,)] = conn.execute(
                "SELECT count(*) FROM pg_inherits WHERE inhparent = 'jl_queue'::regclass"
            ).fetchall()
            [(generic, custom)] = conn.execute(
                "SELECT generic_plans, custom_plans FROM pg_prepared_statements "
                "WHERE statement LIKE 'WITH v AS MATERIALIZED%%'"
            ).fetchall()
        assert ledger.projections().verify().clean
    assert partitions >= 16
    assert generic >= 5 and custom <= 5, (generic, custom)


def test_the_one_statement_names_the_month_of_its_jobs_and_falls_back_to_the_parent(
    empty_pg_url: str,
) -> None:
    """A batch of one month's jobs is written through that month's partition (the generic
    plan of the parent locks every month first); one of a month the lookup got wrong (its
    rows are in the default partition) through the parent, after the named partition failed.
    Every write lands, and the views verify. (A batch of two months goes to the parent:
    tests/unit/test_queue_months.py.)"""

    from ledger.clock import FakeClock
    from ledger.store.postgres.queue_months import QueueMonths, month_partition

    clock = FakeClock(datetime(2025, 3, 10, tzinfo=UTC))
    with Ledger.open(empty_pg_url, create=True, clock=clock) as ledger:
        ledger.define("t")
        store = ledger.store
        store.ensure_partitions(clock.now())  # type: ignore[attr-defined]  # March to June
        march = claimed(ledger, 3)
        name = store.queue_months.partition_of([j.job_id for j in march])  # type: ignore[attr-defined]
        assert name == "jl_queue_p202503"
        assert len(ledger.start_claimed(march).accepted) == 3
        # Written through it: a statement naming it that failed would have it forgotten.
        assert store.queue_months.partition_of([j.job_id for j in march]) == name  # type: ignore[attr-defined]

        clock.advance(days=200)  # past the months made ahead: the default partition
        late = claimed(ledger, 2)
        month = month_partition(late[0].job_id)
        assert month == "jl_queue_p202509"
        # A lookup that says the month is attached, as one made before retention archived
        # it would: the statement naming it fails whole, and the parent's writes the jobs.
        lying = QueueMonths(lambda: [month])
        store.queue_months = lying  # type: ignore[attr-defined]
        assert lying.partition_of([j.job_id for j in late]) == month
        assert len(ledger.start_claimed(late).accepted) == 2
        assert lying.partition_of([j.job_id for j in late]) is None  # forgotten

        for job in [*march, *late]:
            assert (ledger.get(job.job_id) or job).stage == Stage.RUNNING
        assert ledger.projections().verify().clean


def test_progress_is_decided_on_the_known_state_or_again_on_the_stored_one(
    defined: Ledger, clock: FakeClock
) -> None:
    """``progress_known``: from the state the last write returned, one report; from a state
    a heartbeat has since moved on, decided again on the stored state (the heartbeat's lease
    kept); refused as ``progress`` refuses once the job is cancelled."""
    from ledger.core.errors import LedgerError

    [job] = claimed(defined, 1)
    assert job.lease is not None
    [running] = defined.start_claimed([job]).accepted
    first = defined.progress_known(running, stage="upload", done=1, total=2)
    assert first.version == running.version + 2  # a stage change and the counts
    assert (first.stage, first.progress_done, first.progress_total) == ("upload", 1, 2)
    clock.advance(5)
    beat = defined.heartbeat(job.lease, lease_s=60)
    second = defined.progress_known(first, done=2)  # stale: the heartbeat came between
    assert second.version == beat.version + 1 == len(defined.history(job.job_id))
    assert second.lease_expires_at == beat.lease_expires_at and second.progress_done == 2
    assert defined.get(job.job_id) == second
    defined.cancel(job.job_id)
    with pytest.raises(LedgerError) as by_known:
        defined.progress_known(second, done=3)
    with pytest.raises(LedgerError) as by_lock:
        defined.progress(job.lease, done=3)
    assert type(by_known.value) is type(by_lock.value)
    assert defined.projections().verify().clean
