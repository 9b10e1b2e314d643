"""The verify task runner on its own: one verify at a time, its result kept; ordered by
events, not sleeps."""

from __future__ import annotations

import threading
from datetime import UTC, datetime
from typing import Any

from ledger.core.errors import DatabaseBusyError
from ledger.http.verify_tasks import VerifyTask, VerifyTasks

AT = datetime(2026, 1, 1, tzinfo=UTC)
WAIT_S = 10.0


def _finished(tasks: VerifyTasks, task: VerifyTask) -> VerifyTask:
    found = tasks.wait(task.task_id, WAIT_S)
    assert found is not None and found.status != "running"
    return found


def test_a_second_start_while_one_runs_returns_the_running_task() -> None:
    release = threading.Event()

    def verify() -> dict[str, Any]:
        assert release.wait(WAIT_S)
        return {"clean": False, "views": []}

    tasks = VerifyTasks(verify, lambda: AT)
    first, started = tasks.start()
    second, again = tasks.start()
    assert started and not again
    assert second.task_id == first.task_id and second.status == "running"
    release.set()
    done = _finished(tasks, first)
    assert done.status == "differences" and done.report == {"clean": False, "views": []}
    third, started_again = tasks.start()  # the last one ended: a new task
    assert started_again and third.task_id != first.task_id


def test_a_verify_that_raises_is_a_failed_task() -> None:
    def verify() -> dict[str, Any]:
        raise DatabaseBusyError("locked")

    tasks = VerifyTasks(verify, lambda: AT)
    task, _ = tasks.start()
    failed = _finished(tasks, task)
    assert failed.status == "failed"
    assert failed.error == {"code": DatabaseBusyError.code, "message": "locked"}
