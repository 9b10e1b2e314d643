"""History-derived diagnostics, each on a constructed history (pure: no database)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from uuid import uuid4

from ledger.core import decide, lost_attempts
from ledger.core.codec import Record
from ledger.core.diagnostics import (
    diagnose,
    leases_lost,
    longest_heartbeat_gap,
    reap_deferrals,
    recorded_started_without_renewal_heartbeat,
    retries,
    started_without_renewal_heartbeat,
    time_to_first_lease,
    workers_lost,
)
from ledger.core.events import JobEvent
from ledger.core.reaping import decide_reap_deferral
from ledger.core.state import JobState, evolve
from ledger.core.values import (
    BackoffPolicy,
    DeferralCause,
    EnqueueRequest,
    Failure,
    FailureKind,
    JobDefinition,
)

T0 = datetime(2026, 1, 1, tzinfo=UTC)
DEFINITION = JobDefinition(job_type="t", backoff=BackoffPolicy(base_s=10, max_s=100, jitter=0))


class History:
    """Builds a history by running the real decisions at chosen times."""

    def __init__(self) -> None:
        event = decide.decide_enqueue(uuid4(), EnqueueRequest(job_type="t"), DEFINITION, T0)
        self.state: JobState = evolve(None, event)
        self.events: list[JobEvent] = [event]

    def record(self, *events: JobEvent) -> None:
        """Append events decided by the caller."""
        for event in events:
            self.state = evolve(self.state, event)
            self.events.append(event)

    def at(self, seconds: float) -> datetime:
        return T0 + timedelta(seconds=seconds)

    def lease(self, t: float, lease_s: float = 30) -> History:
        self.record(decide.decide_lease(self.state, "w", lease_s, self.at(t)))
        return self

    def running(self, t: float) -> History:
        assert self.state.lease is not None
        self.record(
            *decide.decide_progress(self.state, self.state.lease, self.at(t), stage="running")
        )
        return self

    def beat(self, t: float, lease_s: float = 30) -> History:
        assert self.state.lease is not None
        self.record(decide.decide_heartbeat(self.state, self.state.lease, lease_s, self.at(t)))
        return self

    def reap(self, t: float) -> History:
        """As the reaper does it: the flag derived from the history so far."""
        flag = bool(started_without_renewal_heartbeat(self.records).value)
        self.record(
            *lost_attempts.decide_reap(
                self.state, self.at(t), retry_delay_s=5, started_without_renewal_heartbeat=flag
            )
        )
        return self

    def fail(self, t: float) -> History:
        assert self.state.lease is not None
        failure = Failure(kind=FailureKind.RETRYABLE, code="c", message="m")
        self.record(
            *decide.decide_fail(self.state, self.state.lease, self.at(t), failure, jitter_draw=0.5)
        )
        return self

    def defer(self, t: float, cause: DeferralCause) -> History:
        """As the reaper does when the reap itself failed: the lease pushed out by 60 s."""
        self.record(decide_reap_deferral(self.state, self.at(t), retry_delay_s=60, cause=cause))
        return self

    def release_stale(self, t: float) -> History:
        """As the boot reap of a restarted pool does it: the attempt is given back."""
        self.record(
            lost_attempts.decide_release_stale(self.state, self.at(t), "released by boot reap")
        )
        return self

    def worker_lost(self, t: float) -> History:
        """As the boot reap does it for an attempt whose handler had started."""
        flag = bool(started_without_renewal_heartbeat(self.records).value)
        self.record(
            *lost_attempts.decide_worker_lost(
                self.state, self.at(t), started_without_renewal_heartbeat=flag
            )
        )
        return self

    def succeed(self, t: float) -> History:
        assert self.state.lease is not None
        self.record(decide.decide_succeed(self.state, self.state.lease, self.at(t)))
        return self

    @property
    def records(self) -> list[Record]:
        return [Record(self.state.job_id, i + 1, e) for i, e in enumerate(self.events)]


def test_running_without_any_later_heartbeat_is_flagged_with_its_evidence() -> None:
    """Running at t=1 after the claim at t=0, nothing after: true, citing the start event."""
    history = History().lease(0).running(1)
    finding = started_without_renewal_heartbeat(history.records)
    assert finding.value is True and finding.evidence == [3]


def test_a_heartbeat_at_the_same_instant_is_not_a_renewal() -> None:
    """Equal timestamps: still true."""
    history = History().lease(0).running(1).beat(1)
    assert started_without_renewal_heartbeat(history.records).value is True


def test_a_later_heartbeat_clears_the_flag_and_is_cited() -> None:
    """A heartbeat strictly after the start: false, citing start and renewal."""
    history = History().lease(0).running(1).beat(2)
    finding = started_without_renewal_heartbeat(history.records)
    assert finding.value is False and finding.evidence == [3, 4]


def test_not_running_means_false() -> None:
    """A claimed job that never reported running is not flagged."""
    history = History().lease(0).beat(5)
    finding = started_without_renewal_heartbeat(history.records)
    assert finding.value is False and "claimed" in finding.explanation


def test_only_the_current_attempt_counts() -> None:
    """A renewal in an earlier attempt does not clear the current attempt's flag."""
    history = History().lease(0).running(1).beat(2).reap(40).lease(50).running(51)
    assert started_without_renewal_heartbeat(history.records).value is True


def test_longest_heartbeat_gap_against_the_lease() -> None:
    """Gaps 5 s then 20 s: the longest is 20 s, two thirds of a 30 s lease."""
    history = History().lease(0).beat(5).beat(25)
    finding = longest_heartbeat_gap(history.records)
    assert finding.value == 20.0 and "0.67 of the 30s lease" in finding.explanation
    assert finding.evidence == [3, 4]


def test_longest_gap_includes_the_silence_until_now_for_a_live_lease() -> None:
    """With now, the time since the last renewal counts too."""
    history = History().lease(0).beat(5)
    finding = longest_heartbeat_gap(history.records, now=T0 + timedelta(seconds=50))
    assert finding.value == 45.0


def test_the_silence_that_got_a_lease_reaped_counts_as_a_gap() -> None:
    """Claimed at 0, one heartbeat at 10, reaped at 100: the longest gap is 90 s (to the
    reaper's job_failed), not the 10 s before the last renewal."""
    history = History().lease(0).beat(10).reap(100)
    finding = longest_heartbeat_gap(history.records)
    assert finding.value == 90.0 and finding.evidence == [3, 4]


def test_a_silent_execution_released_at_boot_counts_after_a_quick_rerun() -> None:
    """Defect 9: claimed at 0, silent for 660 s until a restarted pool's boot reap released it,
    then re-claimed (the same attempt number) and done in 0.13 s: the longest gap is the
    660 s silence, not the 0.13 s of the last execution."""
    history = History().lease(0).release_stale(660).lease(661).succeed(661.13)
    finding = longest_heartbeat_gap(history.records, now=history.at(5000))
    assert finding.value == 660.0 and finding.evidence == [2, 3]
    assert "22.00 of the 30s lease" in finding.explanation
    assert "run 1 attempt 1" in finding.explanation


def test_a_reaped_execution_counts_after_its_retry_succeeded() -> None:
    """Silent from 0 until the reaper failed it at 660; attempt 2 succeeded in 0.13 s: the
    longest gap is 660 s, ended by the reaper's job_failed."""
    history = History().lease(0).reap(660).lease(700).succeed(700.13)
    finding = longest_heartbeat_gap(history.records, now=history.at(5000))
    assert finding.value == 660.0 and finding.evidence == [2, 3]


def test_a_live_silent_execution_counts_up_to_now_after_earlier_ones() -> None:
    """A released execution with a 20 s gap, then a live one silent since 100: with now at
    760 the silence to now (660 s) is the longest, citing only the claim that opened it."""
    history = History().lease(0).beat(20).release_stale(25).lease(100)
    finding = longest_heartbeat_gap(history.records, now=history.at(760))
    assert finding.value == 660.0 and finding.evidence == [5]
    assert "still leased" in finding.explanation


def test_a_requeued_job_not_yet_claimed_still_reports_its_earlier_runs() -> None:
    """Cancelled while silently leased, then requeued (attempt 0 again): the cancelled run's
    silence is still the longest gap; None is kept for a job that was never leased."""
    history = History().lease(0)
    history.record(decide.decide_cancel(history.state, history.at(90), "stuck"))
    history.record(decide.decide_requeue(history.state, history.at(95), "again"))
    assert history.state.attempt == 0
    finding = longest_heartbeat_gap(history.records, now=history.at(100))
    assert finding.value == 90.0
    assert longest_heartbeat_gap(History().records, now=T0).value is None


def test_reap_deferrals_count_with_the_latest_error() -> None:
    """Two deferred reaps, then the reap: 2, citing both, explained by the latest error's
    code, sqlstate and first line; a deferral is no renewal, so the gap runs claim -> reap."""
    busy = DeferralCause(code="store.busy", message="lock timeout\nLINE 1: …", sqlstate="55P03")
    conflict = DeferralCause(code="store.concurrency_conflict", message="duplicate key")
    history = History().lease(0).defer(31, conflict).defer(92, busy).reap(153)
    finding = reap_deferrals(history.records)
    assert finding.value == 2 and finding.evidence == [3, 4]
    assert finding.explanation.endswith("the latest by store.busy, sqlstate 55P03: lock timeout")
    assert reap_deferrals(History().lease(0).records).value == 0
    assert longest_heartbeat_gap(history.records).evidence == [2, 5]


def test_the_flag_the_reaper_recorded_is_reported_after_the_job_moved_on() -> None:
    """After a reaped running attempt and a new claim, the live flag is false but the
    recorded one is true, citing the reaper's job_failed."""
    history = History().lease(0).running(1).reap(40).lease(50)
    assert started_without_renewal_heartbeat(history.records).value is False
    finding = recorded_started_without_renewal_heartbeat(history.records)
    assert finding.value is True and finding.evidence == [4]
    assert recorded_started_without_renewal_heartbeat(History().records).value is None


def test_leases_lost_counts_lease_expired_failures_in_earlier_attempts() -> None:
    """Two reaped attempts and a normal failure: two leases lost."""
    history = History().lease(0).reap(31).lease(40).fail(41).lease(70).reap(101)
    finding = leases_lost(history.records)
    assert finding.value == 2 and len(finding.evidence) == 2


def test_retries_count_and_total_backoff() -> None:
    """A reaper retry (5 s) and a backoff retry after attempt 2 (20 s): 2 retries, 25 s."""
    history = History().lease(0).reap(31).lease(40).fail(41)
    finding = retries(history.records)
    assert finding.value == 2 and "25s of backoff" in finding.explanation


def test_time_from_enqueue_to_first_lease() -> None:
    """Enqueued at 0, first claimed at 12.5 s."""
    history = History().lease(12.5).reap(50).lease(60)
    finding = time_to_first_lease(history.records)
    assert finding.value == 12.5 and finding.evidence == [1, 2]
    assert time_to_first_lease(History().records).value is None


def test_workers_lost_counts_the_deaths_and_says_the_job_ended_dead() -> None:
    """Three attempts started and lost with their process (max 3): workers_lost 3, citing
    each failure, saying it took its worker down 3 times and is dead after attempt 3 of 3;
    leases_lost stays 0."""
    history = History()
    request = EnqueueRequest(job_type="t", max_attempts=3)
    enqueued = decide.decide_enqueue(history.state.job_id, request, DEFINITION, T0)
    history.events, history.state = [enqueued], evolve(None, enqueued)
    for t in (0, 20, 60):  # each retry due 10 s, then 20 s, after its loss
        history.lease(t).running(t + 1).worker_lost(t + 5)
    finding = workers_lost(history.records)
    assert finding.value == 3 and len(finding.evidence) == 3
    assert "took its worker down 3 times" in finding.explanation
    assert "dead after attempt 3 of 3 (job.worker_lost)" in finding.explanation
    assert leases_lost(history.records).value == 0
    assert workers_lost(History().lease(0).records).value == 0


def test_diagnose_returns_every_finding() -> None:
    """One call gives all eight diagnostics by name."""
    names = [f.name for f in diagnose(History().lease(0).records)]
    assert names == [
        "started_without_renewal_heartbeat",
        "recorded_started_without_renewal_heartbeat",
        "longest_heartbeat_gap_s",
        "leases_lost",
        "workers_lost",
        "reap_deferrals",
        "retries",
        "time_to_first_lease_s",
    ]
