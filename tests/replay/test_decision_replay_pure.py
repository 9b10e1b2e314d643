"""Decision replay as a pure function: random command sequences decided by the current code
replay clean, and an altered event is reported at exactly its version."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from uuid import UUID

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from msgspec.structs import replace

from ledger.core import decide, lost_attempts
from ledger.core.backoff import delay_bounds
from ledger.core.codec import Record
from ledger.core.decision_replay import check_history
from ledger.core.diagnostics import started_without_renewal_heartbeat
from ledger.core.errors import LedgerError
from ledger.core.events import JobEvent, JobFailed, JobReapDeferred, JobRetryScheduled
from ledger.core.reaping import decide_reap_deferral
from ledger.core.requests import normalise_request
from ledger.core.state import JobState, Lease, evolve
from ledger.core.values import (
    BackoffPolicy,
    DeferralCause,
    EnqueueRequest,
    Failure,
    FailureKind,
    JobDefinition,
)

T0 = datetime(2026, 1, 1, tzinfo=UTC)
DEFINITION = JobDefinition(
    job_type="p", max_attempts=3, backoff=BackoffPolicy(base_s=2.0, max_s=30.0, jitter=0.25)
)
DEFINITIONS = [(T0, DEFINITION)]
JOB = UUID(int=7)
KINDS = [FailureKind.RETRYABLE, FailureKind.TERMINAL, FailureKind.TIMEOUT]
STAGES = ["running", "fetching", "claimed"]

# Weighted by repetition: claims and failures often, cancels rarely, so histories reach
# retries, dead letters and requeues.
NAMES = [
    *["claim"] * 4,
    *["heartbeat", "progress", "fail"] * 3,
    *["succeed", "release", "stale", "reap", "defer", "cancel"],
    *["requeue"] * 2,
]
COMMANDS = st.lists(
    st.tuples(
        st.sampled_from(NAMES),
        st.floats(min_value=0.0, max_value=0.999),
        st.integers(min_value=0, max_value=40),
    ),
    max_size=60,
)


def _decide(name: str, state: JobState, now: datetime, draw: float, n: int) -> list[JobEvent]:
    lease = state.lease or Lease(JOB, state.run_number, state.attempt, "w")
    if name == "claim":
        return [decide.decide_lease(state, "w", 5.0 + n, max(now, state.run_at))]
    if name == "heartbeat":
        return [decide.decide_heartbeat(state, lease, 5.0 + n, now)]
    if name == "progress":
        checkpoint = {"n": n} if n % 2 else None
        stage = STAGES[n % 3] if n % 4 else None
        return decide.decide_progress(state, lease, now, stage=stage, done=n, checkpoint=checkpoint)
    if name == "succeed":
        return [decide.decide_succeed(state, lease, now, output={"n": n})]
    if name == "fail":
        failure = Failure(kind=KINDS[n % 3], code="c", message="m")
        not_before = now + timedelta(seconds=100 * n) if n % 5 == 0 else None
        return decide.decide_fail(
            state, lease, now, failure, jitter_draw=draw, not_before=not_before
        )
    if name == "release":
        return [decide.decide_release(state, lease, now, "released by worker")]
    if name == "stale":
        return [lost_attempts.decide_release_stale(state, now, "released by boot reap")]
    if name == "cancel":
        return [decide.decide_cancel(state, now, "cancelled by operator")]
    if name == "requeue":
        return [decide.decide_requeue(state, now, "requeued by operator")]
    raise AssertionError(name)


def _reap_or_defer(
    name: str, state: JobState, records: list[Record], now: datetime, n: int
) -> list[JobEvent]:
    """A reaper pass over an expired lease: its reap, or (its reap failed) its deferral."""
    if name == "defer":
        cause = DeferralCause(code="store.busy", message="lock timeout", sqlstate="55P03")
        return [decide_reap_deferral(state, now, retry_delay_s=n / 3, cause=cause)]
    flag = bool(started_without_renewal_heartbeat(records).value)
    return lost_attempts.decide_reap(
        state, now, retry_delay_s=float(n), started_without_renewal_heartbeat=flag
    )


def build(commands: list[tuple[str, float, int]]) -> list[Record]:
    """The history the current code records for ``commands`` (refused ones record nothing)."""
    request = normalise_request(EnqueueRequest(job_type="p", payload={"i": 1}))
    enqueued = decide.decide_enqueue(JOB, request, DEFINITION, T0)
    state = evolve(None, enqueued)
    records = [Record(JOB, 1, enqueued)]
    now = T0
    for name, draw, n in commands:
        now += timedelta(seconds=n / 4)
        try:
            if name in ("reap", "defer"):
                if state.lease_expires_at is None:
                    continue
                now = max(now, state.lease_expires_at + timedelta(microseconds=1))
                events = _reap_or_defer(name, state, records, now, n)
            else:
                events = _decide(name, state, now, draw, n)
        except LedgerError:
            continue
        for event in events:
            now = max(now, event.at)
            state = evolve(state, event)
            records.append(Record(JOB, state.version, event))
    return records


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(COMMANDS)
def test_random_histories_of_the_current_code_replay_clean(
    commands: list[tuple[str, float, int]],
) -> None:
    """Whatever the commands, jitter draws and not_before times, no finding."""
    records = build(commands)
    checked = check_history(records, DEFINITIONS)
    assert checked.findings == []
    assert checked.events == len(records)


@settings(max_examples=200, deadline=None)
@given(COMMANDS)
def test_a_retry_hastened_below_the_policy_is_found_at_its_version(
    commands: list[tuple[str, float, int]],
) -> None:
    """Halve the lower bound of the first worker retry's delay: exactly one finding, at that
    job_retry_scheduled (later claims stay legal: the job only became due earlier)."""
    records = build([("claim", 0.5, 1), ("fail", 0.3, 3), *commands])
    index = next(
        i
        for i, r in enumerate(records)
        if isinstance(r.event, JobRetryScheduled)
        and isinstance(records[i - 1].event, JobFailed)
        and records[i - 1].event.failure.kind is not FailureKind.LEASE_EXPIRED
    )
    retry = records[index].event
    assert isinstance(retry, JobRetryScheduled)
    low, _ = delay_bounds(DEFINITION.backoff, retry.attempt)
    hastened = replace(retry, delay_s=low / 2, next_run_at=retry.at + timedelta(seconds=low / 2))
    altered = [*records[:index], records[index]._replace(event=hastened), *records[index + 1 :]]
    [finding] = check_history(altered, DEFINITIONS).findings
    assert (finding.version, finding.topic, finding.rule) == (
        index + 1,
        "job_retry_scheduled",
        "backoff.out_of_bounds",
    )


def _deferred_history() -> tuple[list[Record], int]:
    """Claimed for 5 s, deferred at 6 s by 60 s, then reaped once that lease expired; and
    the index of the deferral."""
    records = build([("claim", 0.5, 0), ("defer", 0.5, 180), ("reap", 0.5, 4)])
    names = [r.event.name for r in records]
    assert names == [
        "job_enqueued", "job_leased", "job_reap_deferred", "job_failed", "job_retry_scheduled",
    ]  # fmt: skip
    return records, 2


def test_a_correct_deferral_replays_clean() -> None:
    """A deferral of an expired lease pushed out by exactly its delay, then the reap after
    it: no finding."""
    records, _ = _deferred_history()
    assert check_history(records, DEFINITIONS).findings == []


def test_a_wrong_lease_push_is_found_at_the_deferral() -> None:
    """A deferral whose lease_expires_at is not at + delay_s: reap.deferral_lease_push there."""
    records, index = _deferred_history()
    deferral = records[index].event
    assert isinstance(deferral, JobReapDeferred)
    pushed = replace(deferral, lease_expires_at=deferral.lease_expires_at + timedelta(hours=1))
    altered = [*records[:index], records[index]._replace(event=pushed)]
    [finding] = check_history(altered, DEFINITIONS).findings
    assert (finding.version, finding.topic, finding.rule) == (
        index + 1,
        "job_reap_deferred",
        "reap.deferral_lease_push",
    )
    assert "delay_s=60" in finding.recorded


def test_a_deferral_of_a_live_lease_is_found() -> None:
    """A deferral stamped before the lease ended (nothing to defer): reap.lease_live."""
    records, index = _deferred_history()
    deferral = records[index].event
    assert isinstance(deferral, JobReapDeferred)
    early_at = records[1].event.at + timedelta(seconds=1)
    early = replace(
        deferral, at=early_at, lease_expires_at=early_at + timedelta(seconds=deferral.delay_s)
    )
    altered = [*records[:index], records[index]._replace(event=early)]
    [finding] = check_history(altered, DEFINITIONS).findings
    assert (finding.version, finding.rule) == (index + 1, "reap.lease_live")
