"""Random command sequences and concurrent writers: the views always equal their replay."""

from __future__ import annotations

import threading
from uuid import UUID

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from projection_helpers import populate, raw

from ledger import Completion, EnqueueRequest, Failure, FailureKind, FakeClock, Ledger, LedgerError
from ledger.core.values import Subject, SubjectOp
from projections.rebuilder import Rebuilder


def job_event_count(url: str) -> int:
    [(total,)] = raw(url, "SELECT count(*) FROM jl_events")
    [(definition_events,)] = raw(url, "SELECT coalesce(sum(stream_version), 0) FROM jl_definitions")
    return int(total) - int(definition_events)


def audit_row_count(url: str) -> int:
    [(rows, distinct)] = raw(url, "SELECT count(*), count(DISTINCT position) FROM jl_audit")
    assert rows == distinct
    return int(rows)


OPERATIONS = st.lists(
    st.tuples(
        st.sampled_from(
            [
                "enqueue",
                "subject",
                "claim",
                "succeed",
                "fail",
                "requeue",
                "cancel",
                "reap",
                "catch_up",
            ]
        ),
        st.integers(min_value=0, max_value=3),
        st.sampled_from(list(FailureKind)),
        st.booleans(),
    ),
    min_size=5,
    max_size=30,
)


@settings(
    max_examples=6,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(operations=OPERATIONS)
def test_random_command_sequences_leave_no_drift_in_any_view(
    db_url: str, operations: list[tuple[str, int, FailureKind, bool]]
) -> None:
    """Whatever commands run (sync subjects, deaths, requeues, deletes included), verify
    finds every view equal to the replay of the history."""
    clock = FakeClock()
    with Ledger.open(db_url, clock=clock, auto_define=True) as ledger:
        known: list[UUID] = []
        for operation, n, kind, flag in operations:
            target = known[n % len(known)] if known else None
            state = ledger.get(target) if target else None
            try:
                if operation == "enqueue":
                    ids = [
                        e.job_id
                        for e in ledger.enqueue_many([EnqueueRequest(job_type="t")] * (n + 1))
                    ]
                    known.extend(i for i in ids if i is not None)
                elif operation == "subject":
                    op = SubjectOp.DELETE if flag and n % 2 else SubjectOp.UPSERT
                    subject = Subject(source_id="s", uri=f"u{n}", op=op)
                    job_id = ledger.enqueue("t", subject=subject, max_attempts=1).job_id
                    if job_id is not None:
                        known.append(job_id)
                elif operation == "claim":
                    ledger.claim(f"w{n}", limit=n + 2, lease_s=5)
                elif operation == "reap":
                    clock.advance(10)
                    ledger.reap_expired(retry_delay_s=0)
                elif operation == "catch_up":
                    ledger.catch_up()  # the audit view, up to here (the rest comes later)
                elif state is None:
                    continue
                elif operation == "requeue":
                    ledger.requeue(state.job_id)
                elif operation == "cancel":
                    ledger.cancel(state.job_id)
                elif state.lease is None:
                    continue
                elif operation == "succeed":
                    revision = f"r{n}" if flag else None
                    ledger.succeed(state.lease, revision=revision, content_hash=None)
                elif operation == "fail":
                    ledger.fail(state.lease, Failure(kind=kind, code="c", message="m"))
            except LedgerError:
                pass
        # The audit view is compared with the history up to its own position…
        partly = ledger.projections().verify()
        # …and, caught up, with all of it: one row per job event.
        ledger.catch_up()
        whole = ledger.projections().verify()
        head = ledger.store.head_position()
    assert partly.clean, partly
    assert whole.clean, whole
    assert whole.position == head
    assert job_event_count(db_url) == audit_row_count(db_url)


def test_rebuild_under_concurrent_writes_loses_and_duplicates_nothing(db_url: str) -> None:
    """While a thread keeps enqueuing, claiming and succeeding, a rebuild (forced through
    several catch-up rounds) swaps in views that verify clean, with one row per job."""
    populate(db_url)
    stop = threading.Event()
    progressed = threading.Condition()
    rounds = [0]
    enqueued: list[UUID] = []
    errors: list[BaseException] = []

    def writer() -> None:
        with Ledger.open(db_url, pool_size=2) as ledger:
            try:
                while not stop.is_set():
                    batch = ledger.enqueue_many([EnqueueRequest(job_type="t")] * 5)
                    enqueued.extend(e.job_id for e in batch)
                    jobs = ledger.claim("busy", limit=4, lease_s=60)
                    ledger.succeed_many([Completion(lease=j.lease) for j in jobs if j.lease])
                    with progressed:
                        rounds[0] += 1
                        progressed.notify_all()
            except BaseException as exc:  # reported by the main thread
                errors.append(exc)
                with progressed:
                    progressed.notify_all()

    phases_seen: set[str] = set()

    def wait_for_writes(phase: str, done: int, total: int) -> None:
        # Let the writer append between the snapshot and the swap, once as each phase
        # begins (never while the swap holds the locks the writer needs). Waiting on every
        # call would feed the catch-up as fast as it reads: it would never finish.
        if phase == "swap" or phase in phases_seen:
            return
        phases_seen.add(phase)
        with progressed:
            target = rounds[0] + 2
            assert progressed.wait_for(lambda: rounds[0] >= target or errors, timeout=30)

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        with Ledger.open(db_url) as ledger:
            rebuilder = Rebuilder(
                ledger.store,
                progress=wait_for_writes,
                batch=40,
                chunk=7,
                catch_up_locked_below=5,
            )
            report = rebuilder.rebuild()
    finally:
        stop.set()
        thread.join(timeout=60)
    assert not errors, errors
    # The writer appended while the rebuild replayed, loaded and caught up.
    assert {"replay", "catch-up"} <= phases_seen and rounds[0] >= 2 * len(phases_seen)
    assert report.position > 0
    with Ledger.open(db_url) as ledger:
        ledger.catch_up()
        verified = ledger.projections().verify()
        assert verified.clean, verified
        counts = ledger.counts()
    # The audit view (rebuilt with the rest, then caught up): one row per job event.
    assert audit_row_count(db_url) == job_event_count(db_url)
    assert sum(counts.values()) == 12 + len(enqueued) == len(set(enqueued)) + 12
