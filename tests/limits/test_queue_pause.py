"""Queue pause and resume on both backends: events in the queue's stream, a paused queue's
jobs pending and unclaimed, leased ones finishing, the views and replay holding."""

from __future__ import annotations

from ledger import EnqueueRequest, Ledger
from ledger.core.queue_pauses import QueuePaused, QueueResumed, queue_stream_id
from ledger.views.audit_query import AuditQuery


def test_a_paused_queue_is_not_claimed_and_resume_claims_it(defined: Ledger) -> None:
    """Pausing "a" leaves its jobs pending while "b"'s are claimed, a leased job of "a"
    still succeeds; resuming claims "a" again; both events name the actor and reason."""
    [running] = [e.job_id for e in defined.enqueue_many([EnqueueRequest(job_type="t", queue="a")])]
    [lease] = defined.claim("w")
    assert lease.job_id == running
    waiting = [
        e.job_id
        for e in defined.enqueue_many([EnqueueRequest(job_type="t", queue="a") for _ in range(2)])
    ]
    other = defined.enqueue("t", queue="b").job_id
    paused = defined.limits.pause_queue("a", reason="downstream maintenance", actor="ops")
    assert paused is not None and paused.paused
    assert [job.job_id for job in defined.claim("w", limit=10)] == [other]
    assert defined.claim("w", limit=10, queues=["a"]) == []
    assert lease.lease is not None
    defined.succeed(lease.lease)
    [blocker] = defined.blockers(waiting[0])
    assert blocker.reason == "queue_paused"
    assert "paused by ops" in blocker.message and "downstream maintenance" in blocker.message
    summary = {q.queue: q for q in defined.limits.queues()}
    assert (summary["a"].paused, summary["a"].pending, summary["a"].leased) == (True, 2, 0)
    assert (summary["b"].paused, summary["b"].leased) == (False, 1)
    defined.limits.resume_queue("a", reason="done", actor="ops")
    assert sorted(job.job_id for job in defined.claim("w", limit=10)) == sorted(waiting)
    events = [r.event for r in defined.store.history(queue_stream_id("a"))]
    assert [type(e) for e in events] == [QueuePaused, QueueResumed]
    assert [(e.actor, e.reason) for e in events] == [  # type: ignore[attr-defined]
        ("ops", "downstream maintenance"),
        ("ops", "done"),
    ]
    audit = defined.audit(AuditQuery(events=("queue_paused", "queue_resumed"), order="oldest"))
    assert [(row.event, row.job_type) for row in audit.rows] == [
        ("queue_paused", "queue:a"),
        ("queue_resumed", "queue:a"),
    ]
    report = defined.projections().verify()
    assert report.clean, report
    assert [f for replay in defined.replay_check_all() for f in replay.findings] == []


def test_pausing_twice_appends_once_and_resuming_a_running_queue_nothing(
    defined: Ledger,
) -> None:
    """Pause and resume are idempotent: a repeat appends nothing."""
    before = defined.store.head_position()
    assert defined.limits.resume_queue("never-paused") is None
    assert defined.store.head_position() == before
    defined.limits.pause_queue("a")
    defined.limits.pause_queue("a")
    assert defined.store.head_position() == before + 1
    defined.enqueue("t", queue="a")
    assert defined.claim("w", types=["t"]) == []
    rebuilt = defined.projections().rebuild(["queue_states"])
    assert rebuilt.rows["queue_states"] == 1
    assert defined.claim("w", types=["t"]) == []
