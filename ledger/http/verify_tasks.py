"""The projections' verify as a background task: one at a time, its result kept for polling.

``projections verify`` replays the whole history, which takes minutes on a large ledger:
longer than a request should hold a connection. :class:`VerifyTasks` runs it on a thread of
its own and keeps each task's outcome (the last :data:`KEPT` tasks) for
``GET /api/v1/projections/verify/{task}``. A start while one runs returns the running one
(the caller polls it), so a retried request never queues a second full replay."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from datetime import datetime
from typing import Any, Literal
from uuid import UUID, uuid4

import msgspec

from ledger.core.errors import LedgerError

KEPT = 20
"""How many finished tasks' results are kept (older ones are forgotten: 404)."""

TaskStatus = Literal["running", "ok", "differences", "failed"]


class VerifyTask(msgspec.Struct):
    task_id: UUID
    status: TaskStatus
    started_at: datetime
    finished_at: datetime | None = None
    report: dict[str, Any] | None = None
    """``projections verify --json``'s object, once finished."""
    error: dict[str, str] | None = None
    """The ledger error's code and message, if the verify could not run."""


class VerifyTasks:
    """Starts verifies on a thread (one at a time) and keeps their results."""

    def __init__(self, verify: Callable[[], dict[str, Any]], now: Callable[[], datetime]) -> None:
        self._verify = verify
        self._now = now
        self._lock = threading.Lock()
        self._finished = threading.Condition(self._lock)
        self._tasks: OrderedDict[UUID, VerifyTask] = OrderedDict()
        self._running: VerifyTask | None = None

    def start(self) -> tuple[VerifyTask, bool]:
        """The task started, and ``True``; or the running one, and ``False``."""
        with self._lock:
            if self._running is not None:
                return self._copy(self._running), False
            task = VerifyTask(uuid4(), "running", self._now())
            self._running = task
            self._tasks[task.task_id] = task
            while len(self._tasks) > KEPT:
                self._tasks.popitem(last=False)
            threading.Thread(target=self._run, args=(task,), daemon=True).start()
            return self._copy(task), True

    def get(self, task_id: UUID) -> VerifyTask | None:
        with self._lock:
            task = self._tasks.get(task_id)
            return None if task is None else self._copy(task)

    def wait(self, task_id: UUID, timeout_s: float) -> VerifyTask | None:
        """The task once it is no longer running (or as it is after ``timeout_s``)."""
        with self._finished:
            self._finished.wait_for(lambda: self._done(task_id), timeout_s)
            task = self._tasks.get(task_id)
            return None if task is None else self._copy(task)

    def _done(self, task_id: UUID) -> bool:
        task = self._tasks.get(task_id)
        return task is None or task.status != "running"

    def _run(self, task: VerifyTask) -> None:
        report: dict[str, Any] | None = None
        error: dict[str, str] | None = None
        try:
            report = self._verify()
        except LedgerError as failure:
            error = {"code": failure.code, "message": failure.message}
        except Exception as failure:
            error = {"code": "ledger.error", "message": repr(failure)}
        with self._lock:
            task.finished_at = self._now()
            task.report, task.error = report, error
            if report is None:
                task.status = "failed"
            else:
                task.status = "ok" if report["clean"] else "differences"
            self._running = None
            self._finished.notify_all()

    @staticmethod
    def _copy(task: VerifyTask) -> VerifyTask:
        return msgspec.structs.replace(task)
