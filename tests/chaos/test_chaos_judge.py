"""The chaos suite's judge, on histories written by hand: what it calls a dropped outcome.

A judge that blames the product for what the harness did makes the suite flaky; one that
excuses too much hides lost work. These pin the line between the two for a SIGKILL.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

from chaos_history import Attempt, HandlerStart, dropped_outcome

T0 = datetime(2026, 12, 7, 12, 0, tzinfo=UTC)
LEASE = timedelta(seconds=3)


def _ms(n: float) -> datetime:
    return T0 + timedelta(milliseconds=n)


def _reaped_after_finish_at(finish_ms: float) -> tuple[HandlerStart, Attempt]:
    """A handler that finished at ``finish_ms`` while its lease (taken at 0) was live, whose
    attempt the reaper then ended with ``lease_expired`` once the lease ran out."""
    job_id = uuid.uuid4()
    finish = HandlerStart(job_id, 1, 1, "chaos0@host:1", _ms(finish_ms), None, finished=True)
    attempt = Attempt(job_id, 1, 1, "chaos0@host:1", T0, [(T0, T0 + LEASE)])
    attempt.ended_at = T0 + LEASE + timedelta(milliseconds=400)
    attempt.ended_by = "failed:lease_expired:lease_expired"
    return finish, attempt


def test_an_outcome_lost_by_a_live_worker_is_reported() -> None:
    finish, attempt = _reaped_after_finish_at(10)
    problem = dropped_outcome(finish, attempt, killed=[])
    assert problem is not None and str(finish.job_id) in problem


def test_a_worker_killed_after_its_handler_finished_is_excused() -> None:
    finish, attempt = _reaped_after_finish_at(10)
    assert dropped_outcome(finish, attempt, killed=[(_ms(12), _ms(15))]) is None


def test_a_finish_written_after_the_kill_was_sent_but_before_it_landed_is_excused() -> None:
    """The harness reads the clock, then signals; the victim, on the other core, may finish
    a handler in between. Its outcome died with it: not the product's loss."""
    finish, attempt = _reaped_after_finish_at(10)
    assert dropped_outcome(finish, attempt, killed=[(_ms(0.5), _ms(14))]) is None


def test_a_kill_that_landed_before_the_finish_excuses_nothing() -> None:
    """A process seen gone before the finish is dated did not write it: that finish came
    from a live incarnation, and its lost outcome is a real loss."""
    finish, attempt = _reaped_after_finish_at(10)
    assert dropped_outcome(finish, attempt, killed=[(_ms(1), _ms(5))]) is not None


def test_a_kill_after_the_attempt_ended_excuses_nothing() -> None:
    finish, attempt = _reaped_after_finish_at(10)
    assert attempt.ended_at is not None
    later = attempt.ended_at + timedelta(seconds=1)
    assert dropped_outcome(finish, attempt, killed=[(later, later)]) is not None
