"""History on both backends: each command's events, the fold equals the view, replay."""

from __future__ import annotations

from datetime import timedelta
from uuid import UUID

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ledger import (
    EnqueueRequest,
    Failure,
    FailureKind,
    FakeClock,
    Ledger,
    LedgerError,
)
from ledger.core.events import (
    JobCancelled,
    JobEnqueued,
    JobEvent,
    JobFailed,
    JobHeartbeated,
    JobLeased,
    JobProgressed,
    JobReleased,
    JobRequeued,
    JobRetryScheduled,
    JobStageChanged,
    JobSucceeded,
)
from ledger.core.state import JobState, fold


def kinds(ledger: Ledger, job_id: UUID) -> list[type[object]]:
    return [type(record.event) for record in ledger.history(job_id)]


def folded(ledger: Ledger, job_id: UUID) -> JobState | None:
    return fold(r.event for r in ledger.history(job_id) if isinstance(r.event, JobEvent))


def test_a_full_life_leaves_exactly_the_expected_events_in_order(
    defined: Ledger, clock: FakeClock
) -> None:
    """Every command appends its events, numbered 1..n, and the view equals their fold."""
    job_id = defined.enqueue("t", {"x": 1}).job_id
    assert job_id is not None
    [job] = defined.claim("w1")
    assert job.lease is not None
    defined.heartbeat(job.lease)
    defined.progress(job.lease, stage="running", done=1, total=2)
    defined.fail(job.lease, Failure(kind=FailureKind.RETRYABLE, code="c", message="m"))
    clock.advance(10)
    [job] = defined.claim("w2")
    assert job.lease is not None
    defined.release(job.lease)
    [job] = defined.claim("w3")
    assert job.lease is not None
    defined.succeed(job.lease, output={"ok": True})
    assert kinds(defined, job_id) == [
        JobEnqueued,
        JobLeased,
        JobHeartbeated,
        JobStageChanged,
        JobProgressed,
        JobFailed,
        JobRetryScheduled,
        JobLeased,
        JobReleased,
        JobLeased,
        JobSucceeded,
    ]
    versions = [record.originator_version for record in defined.history(job_id)]
    assert versions == list(range(1, 12))
    assert folded(defined, job_id) == defined.get(job_id)


def test_cancel_and_requeue_are_recorded_and_folded(defined: Ledger) -> None:
    """cancel → job_cancelled; requeue → job_requeued; the view still equals the fold."""
    job_id = defined.enqueue("t").job_id
    assert job_id is not None
    defined.cancel(job_id)
    defined.requeue(job_id)
    assert kinds(defined, job_id) == [JobEnqueued, JobCancelled, JobRequeued]
    assert folded(defined, job_id) == defined.get(job_id)


def test_state_at_an_event_and_at_a_time(defined: Ledger, clock: FakeClock) -> None:
    """state_at(version=N) / state_at(at=T) fold the matching prefix of the history."""
    start = clock.now()
    job_id = defined.enqueue("t").job_id
    assert job_id is not None
    clock.advance(5)
    [job] = defined.claim("w")
    assert job.lease is not None
    clock.advance(5)
    defined.succeed(job.lease)
    at_one = defined.state_at(job_id, version=1)
    assert at_one is not None and at_one.status == "pending"
    at_two = defined.state_at(job_id, version=2)
    assert at_two is not None and at_two.status == "leased"
    assert defined.state_at(job_id, at=start - timedelta(seconds=1)) is None
    mid = defined.state_at(job_id, at=start + timedelta(seconds=7))
    assert mid is not None and mid.status == "leased" and mid.version == 2
    assert defined.state_at(job_id) == defined.get(job_id)


OPERATIONS = st.lists(
    st.tuples(
        st.sampled_from(
            [
                "enqueue",
                "enqueue_many",
                "claim",
                "heartbeat",
                "progress",
                "succeed",
                "fail",
                "release",
                "cancel",
                "requeue",
                "reap",
                "advance",
            ]
        ),
        st.integers(min_value=0, max_value=5),
        st.sampled_from(list(FailureKind)),
    ),
    min_size=5,
    max_size=40,
)


@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(operations=OPERATIONS)
def test_random_command_sequences_keep_every_view_row_equal_to_its_fold(
    db_url: str, operations: list[tuple[str, int, FailureKind]]
) -> None:
    """Whatever commands run, each job's queue row equals the fold of its history.

    Examples share the database; jobs left by earlier examples may be claimed too, which
    only widens what is checked."""
    clock = FakeClock()
    with Ledger.open(db_url, clock=clock) as ledger:
        ledger.define("t")
        known: list[UUID] = []
        for operation, n, kind in operations:
            target = known[n % len(known)] if known else None
            state = ledger.get(target) if target else None
            lease = state.lease if state else None
            try:
                if operation == "enqueue":
                    job_id = ledger.enqueue("t", {"n": n}, max_attempts=n + 1).job_id
                    assert job_id is not None
                    known.append(job_id)
                elif operation == "enqueue_many":
                    ids = [
                        e.job_id
                        for e in ledger.enqueue_many([EnqueueRequest(job_type="t")] * (n + 1))
                    ]
                    known.extend(i for i in ids if i is not None)
                elif operation == "claim":
                    ledger.claim(f"w{n}", limit=n + 1, lease_s=10)
                elif operation == "advance":
                    clock.advance(n * 7)
                elif operation == "reap":
                    ledger.reap_expired(retry_delay_s=n)
                elif target is None:
                    continue
                elif operation == "cancel":
                    ledger.cancel(target)
                elif operation == "requeue":
                    ledger.requeue(target)
                elif lease is None:
                    continue
                elif operation == "heartbeat":
                    ledger.heartbeat(lease, lease_s=10)
                elif operation == "progress":
                    ledger.progress(lease, stage="running", done=n)
                elif operation == "succeed":
                    ledger.succeed(lease, output=n)
                elif operation == "fail":
                    ledger.fail(lease, Failure(kind=kind, code="c", message="m"))
                elif operation == "release":
                    ledger.release(lease)
            except LedgerError:
                pass
        for job_id in known:
            assert ledger.get(job_id) == folded(ledger, job_id)
