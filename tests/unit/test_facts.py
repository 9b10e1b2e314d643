"""Facts read from a job's state and history (``ledger.core.facts``), on histories built by the
real decisions: pure, no database."""

from __future__ import annotations

from datetime import timedelta

from test_diagnostics import T0, History

from ledger.core import decide, facts
from ledger.core.diagnostics import Finding
from ledger.core.facts import CREATED_FIELDS, TIMELINE_FIELDS
from ledger.core.state import JobState, fold
from ledger.core.values import Failure, FailureKind, JobStatus


class Job(History):
    """:class:`History` with the commands the facts tell apart: release, dead, requeue."""

    def release(self, t: float) -> Job:
        assert self.state.lease is not None
        self.record(decide.decide_release(self.state, self.state.lease, self.at(t), "handed back"))
        return self

    def die(self, t: float) -> Job:
        assert self.state.lease is not None
        failure = Failure(kind=FailureKind.TERMINAL, code="bad", message="no")
        self.record(
            *decide.decide_fail(self.state, self.state.lease, self.at(t), failure, jitter_draw=0)
        )
        return self

    def requeue(self, t: float) -> Job:
        self.record(decide.decide_requeue(self.state, self.at(t), "again"))
        return self


def test_no_lease_renewals_before_the_first_claim() -> None:
    """A job never claimed has no attempt whose renewals could be counted: None, not 0."""
    job = Job()
    assert facts.lease_renewals(job.state, job.records) is None


def test_lease_renewals_count_only_the_current_attempt() -> None:
    """Two heartbeats in attempt 1, one in attempt 2: the current attempt renewed once."""
    job = Job().lease(0).beat(5).beat(10).fail(15).lease(40)
    assert facts.lease_renewals(job.state, job.records) == 0
    job.beat(45)
    assert facts.lease_renewals(job.state, job.records) == 1


def test_lease_renewals_of_a_requeued_run_ignore_the_same_attempt_of_the_old_run() -> None:
    """Attempt 1 of run 2 is not attempt 1 of run 1: the old run's heartbeat is not counted."""
    job = Job().lease(0).beat(5).die(10).requeue(20).lease(30)
    assert (job.state.run_number, job.state.attempt) == (2, 1)
    assert facts.lease_renewals(job.state, job.records) == 0


def test_next_retry_is_the_run_at_of_a_job_waiting_out_a_retry() -> None:
    """After a retryable failure the pending job's next retry is its (backed-off) run_at."""
    job = Job().lease(0).fail(5)
    assert job.state.status is JobStatus.PENDING and job.state.run_at > T0 + timedelta(seconds=5)
    assert facts.next_retry_at(job.state, job.records) == job.state.run_at


def test_no_next_retry_for_a_new_released_leased_or_requeued_job() -> None:
    """Pending because new, released or requeued, or not pending at all: no next retry."""
    assert facts.next_retry_at(Job().state, Job().records) is None
    released = Job().lease(0).fail(5).lease(40).release(41)
    assert facts.next_retry_at(released.state, released.records) is None
    leased = Job().lease(0).fail(5).lease(40)
    assert facts.next_retry_at(leased.state, leased.records) is None
    requeued = Job().lease(0).die(5).requeue(10)
    assert facts.next_retry_at(requeued.state, requeued.records) is None


def test_evidence_is_the_named_records_in_the_order_named() -> None:
    """A finding citing versions 3 then 1 gets those two records, 3 first."""
    job = Job().lease(0).beat(5)
    finding = Finding(name="x", value=None, explanation="", evidence=[3, 1])
    assert facts.evidence(finding, job.records) == [job.records[2], job.records[0]]


def _fold(job: Job, k: int) -> JobState:
    """The state after the first ``k`` events."""
    state = fold(record.event for record in job.records[:k])
    assert state is not None
    return state


def test_state_changes_are_the_diff_of_consecutive_folds() -> None:
    """Each entry lists exactly the timeline fields whose values differ between the folds
    before and after its event, with both values; the first lists the created fields."""
    job = Job().lease(0).beat(5).fail(10).lease(40).die(45).requeue(50)
    entries = facts.state_changes(job.records)
    assert [entry.record for entry in entries] == job.records
    first = entries[0]
    assert first.created and list(first.changes) == list(CREATED_FIELDS)
    assert all(old is None for old, _ in first.changes.values())
    for k, entry in enumerate(entries[1:], start=2):
        before, after = _fold(job, k - 1), _fold(job, k)
        expected = {
            name: (getattr(before, name), getattr(after, name))
            for name in TIMELINE_FIELDS
            if getattr(before, name) != getattr(after, name)
        }
        assert not entry.created and entry.changes == expected
        assert entry.changes, f"event {k} changed nothing visible"
    assert entries[1].changes["status"] == (JobStatus.PENDING, JobStatus.LEASED)


def test_history_prefix_by_version_and_by_time() -> None:
    """The prefix up to event N, or up to a time, is the history then: folded, it is the
    state after event N / at that time; both bounds together keep what both admit."""
    job = Job().lease(1).release(5).lease(9)
    records = job.records
    by_version = facts.history_prefix(records, version=2)
    assert [r.originator_version for r in by_version] == [1, 2]
    state = fold(r.event for r in by_version)
    assert state is not None and state.status is JobStatus.LEASED and state.attempt == 1
    by_time = facts.history_prefix(records, at=job.at(5))
    assert [r.originator_version for r in by_time] == [1, 2, 3]
    both = facts.history_prefix(records, version=2, at=job.at(0))
    assert [r.originator_version for r in both] == [1]
    assert facts.history_prefix(records, at=T0 - timedelta(seconds=1)) == []
    assert facts.history_prefix(records) == list(records)


def test_history_prefix_stops_at_the_first_later_stamp() -> None:
    """An event stamped after ``at`` ends the prefix even when a later event is stamped
    earlier (interleaved clocks): a prefix, so it always folds."""
    job = Job().lease(10).release(2)  # the release is stamped before the lease
    prefix = facts.history_prefix(job.records, at=job.at(5))
    assert [r.originator_version for r in prefix] == [1]
    assert fold(r.event for r in prefix) is not None
