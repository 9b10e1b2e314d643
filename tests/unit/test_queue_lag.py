"""Which changes may leave a job's row behind, and catching a row up (pure)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from uuid import uuid4

from ledger.core import decide
from ledger.core.requests import normalise_request
from ledger.core.state import JobState, evolve
from ledger.core.values import BackoffPolicy, EnqueueRequest, JobDefinition, Stage
from ledger.views.queue import PROJECTION, queue_row
from ledger.views.queue_lag import LAGGING_COLUMNS, caught_up, in_lease_only, rolled_forward

T0 = datetime(2026, 1, 1, tzinfo=UTC)
DEFINITION = JobDefinition(job_type="t", backoff=BackoffPolicy(base_s=10, max_s=100, jitter=0))


def leased_job() -> JobState:
    request = normalise_request(EnqueueRequest(job_type="t", payload={"i": 1}))
    state = evolve(None, decide.decide_enqueue(uuid4(), request, DEFINITION, T0))
    return evolve(state, decide.decide_lease(state, "w", 30, T0))


def after(state: JobState, events: object) -> JobState:
    for event in events if isinstance(events, list) else [events]:
        state = evolve(state, event)
    return state


def test_reports_inside_a_lease_may_leave_the_row_behind() -> None:
    job = leased_job()
    assert job.lease is not None
    start = decide.decide_start(job, job.lease, T0 + timedelta(seconds=1))
    running = after(job, start)
    assert in_lease_only(job, running)
    progress = decide.decide_progress(running, job.lease, T0, stage="upload", done=1, total=2)
    assert in_lease_only(running, after(running, progress))


def test_what_moves_a_filtered_column_rewrites_the_row() -> None:
    job = leased_job()
    assert job.lease is not None
    later = T0 + timedelta(seconds=5)
    beat = after(job, decide.decide_heartbeat(job, job.lease, 60, later))
    assert beat.lease_expires_at != job.lease_expires_at
    assert not in_lease_only(job, beat)  # the reaper's index reads the expiry
    done = after(job, decide.decide_succeed(job, job.lease, later))
    assert not in_lease_only(job, done)
    pending = evolve(None, decide.decide_enqueue(uuid4(), job.request, DEFINITION, T0))
    assert not in_lease_only(pending, leased_job())


def test_a_row_caught_up_changes_only_its_lagging_columns() -> None:
    job = leased_job()
    assert job.lease is not None
    start = decide.decide_start(job, job.lease, T0 + timedelta(seconds=1))
    events = start if isinstance(start, list) else [start]
    [ahead] = caught_up([job], {job.job_id: events})
    assert ahead == after(job, start) and ahead.stage == Stage.RUNNING
    row = queue_row(job, 7, job.job_id)
    rolled = rolled_forward(row, ahead)
    assert rolled == queue_row(ahead, 7, job.job_id)
    changed = {c for c in PROJECTION.columns if rolled[c] != row[c]}
    assert changed and changed <= set(LAGGING_COLUMNS)
    # A drift in an exact column survives the roll forward.
    assert rolled_forward({**row, "priority": 99}, ahead)["priority"] == 99
