"""The dashboard's pure layouts: a job's timeline, a run's DAG, the overview's series (no
database, no browser)."""

from __future__ import annotations

from datetime import timedelta
from uuid import uuid4

from ledger.core.diagnostics import diagnose
from ledger.http.drawings import dag, job_timeline, series
from ledger.views.audit_query import AuditRow
from tests.unit.test_diagnostics import T0, History


def _retried_and_reaped() -> History:
    """Leased, failed (retried), leased again, silent past the lease, reaped."""
    return History().lease(0).beat(10).fail(20).lease(40).running(41).reap(100)


def test_one_mark_per_event_in_order_on_one_lane_per_lease() -> None:
    """Every event is a mark, in stream order; each job_leased opens a lane; the enqueue
    sits on the job's own lane; x grows with time."""
    history = _retried_and_reaped()
    drawing = job_timeline.layout(history.records, diagnose(history.records))
    assert [m.version for m in drawing.marks] == [r.originator_version for r in history.records]
    assert [m.event for m in drawing.marks] == [r.event.name for r in history.records]
    assert [lane.label for lane in drawing.lanes] == [
        "job",
        "run 1 · attempt 1",
        "run 1 · attempt 2",
    ]
    lane_of = [int((m.y - job_timeline.TOP) // job_timeline.LANE_HEIGHT) for m in drawing.marks]
    assert lane_of == [0, 1, 1, 1, 1, 2, 2, 2, 2]
    # a failure and its outcome share a moment: the second is stacked below, not hidden
    assert drawing.marks[4].y == drawing.marks[3].y + 7
    xs = [m.x for m in drawing.marks]
    assert xs == sorted(xs) and xs[0] == job_timeline.LEFT
    assert drawing.marks[-2].kind == "reap" and drawing.marks[3].kind == "failure"


def test_an_expired_lease_is_a_gap_up_to_the_reap() -> None:
    """The second lease (30 s from t=40) expired at t=70 and was reaped at t=100: a bar to
    the expiry, then a gap from the expiry to the reap; the first lease has no gap."""
    history = _retried_and_reaped()
    drawing = job_timeline.layout(history.records, diagnose(history.records))
    second = drawing.lanes[2].y
    [gap] = drawing.gaps
    assert gap.y == second
    assert (gap.start, gap.until) == (T0 + timedelta(seconds=70), T0 + timedelta(seconds=100))
    assert [(b.start, b.until) for b in drawing.bars if b.y == second] == [
        (T0 + timedelta(seconds=40), T0 + timedelta(seconds=70))
    ]
    first = [b for b in drawing.bars if b.y == drawing.lanes[1].y]
    assert [(b.start, b.until) for b in first] == [(T0, T0 + timedelta(seconds=20))]


def test_diagnostics_are_drawn_on_their_evidence() -> None:
    """The reap's lost lease and the reaper's recorded "started without a renewal" ring the
    reaped failure; the longest silence is a bracket between its two events."""
    history = _retried_and_reaped()
    drawing = job_timeline.layout(history.records, diagnose(history.records))
    flagged = {m.event: m.flags for m in drawing.marks if m.flags}
    assert flagged == {
        "job_failed": ("recorded_started_without_renewal_heartbeat", "leases_lost"),
        "job_retry_scheduled": ("retries",),
    }
    [bracket] = drawing.brackets
    assert bracket.label == "longest silence 60s"


def test_a_live_lease_past_its_expiry_shows_up_to_now() -> None:
    """Leased at t=0 for 30 s and silent: at now = t=90 the gap runs from 30 s to now."""
    history = History().lease(0)
    now = T0 + timedelta(seconds=90)
    drawing = job_timeline.layout(history.records, diagnose(history.records, now), now)
    [gap] = drawing.gaps
    assert (gap.start, gap.until) == (T0 + timedelta(seconds=30), now)
    assert "not reaped" in gap.label


def test_dag_layers_are_longest_paths_from_the_roots() -> None:
    """A diamond with a shortcut: d waits for a and c; c for b; b for a: d is in layer 3,
    not 1; roots in layer 0; a layer's steps stack in run order."""
    steps = [("a", []), ("x", []), ("b", ["a"]), ("c", ["b"]), ("d", ["a", "c"])]
    assert dag.layers(steps) == {"a": 0, "x": 0, "b": 1, "c": 2, "d": 3}
    drawing = dag.layout(steps)
    nodes = {n.key: n for n in drawing.nodes}
    assert (nodes["a"].row, nodes["x"].row) == (0, 1)
    assert nodes["d"].x > nodes["c"].x > nodes["b"].x > nodes["a"].x
    assert [(e.prerequisite, e.dependent) for e in drawing.edges] == [
        ("a", "b"),
        ("b", "c"),
        ("a", "d"),
        ("c", "d"),
    ]
    assert drawing.edges[0].path.startswith(f"M{nodes['a'].x + dag.NODE_WIDTH:g},")
    assert drawing.width == 2 * dag.MARGIN + 3 * dag.COLUMN + dag.NODE_WIDTH


def test_dag_layout_survives_a_cycle_and_an_unknown_prerequisite() -> None:
    """A bad spec still draws: every step gets a layer, no edge to a step that is absent."""
    drawing = dag.layout([("a", ["b"]), ("b", ["a"]), ("c", ["nope"])])
    assert {n.key for n in drawing.nodes} == {"a", "b", "c"}
    assert all(e.prerequisite != "nope" for e in drawing.edges)


def _row(event: str, seconds: float, job: object, attempt: int = 1) -> AuditRow:
    return AuditRow(
        position=1,
        job_id=job,  # type: ignore[arg-type]
        job_type="t",
        org=None,
        event=event,
        worker_id="w",
        run_number=1,
        attempt=attempt,
        at=T0 + timedelta(seconds=seconds),
        code=None,
    )


def test_series_buckets_outcomes_and_run_times_per_minute() -> None:
    """Two successes in the last minute (run times 2 s and 4 s), a failure a minute
    before; older rows fall outside the hour."""
    a, b, c = uuid4(), uuid4(), uuid4()
    now = T0 + timedelta(minutes=60, seconds=30)
    rows = [
        _row("job_succeeded", 0, c),  # more than an hour before now: not drawn
        _row("job_failed", 3550, c),
        _row("job_leased", 3600, a),
        _row("job_leased", 3601, b),
        _row("job_succeeded", 3602, a),
        _row("job_succeeded", 3605, b),
    ]
    drawn = series.per_minute(rows, now)
    assert len(drawn.minutes) == series.MINUTES
    assert drawn.minutes[-1] == int((T0 + timedelta(minutes=60)).timestamp())
    assert drawn.succeeded[-1] == 2 and sum(drawn.succeeded) == 2
    assert drawn.failed[-2] == 1
    assert (drawn.run_p50_s[-1], drawn.run_p95_s[-1]) == (2.0, 4.0)
    assert drawn.run_p50_s[-2] is None
