"""Helpers for the workflow tests against a real store: specs, handlers, and the checks that
end every test (``projections verify`` and ``replay --check --all`` clean)."""

from __future__ import annotations

from typing import Any
from uuid import UUID

from ledger import Ledger
from ledger.core.values import JSON
from ledger.runtime.handlers import PermanentError, Registry


def job(key: str, *deps: str, job_type: str = "work", **extra: Any) -> dict[str, Any]:
    """A job step's JSON shape; ``deps`` as ``"a"`` (on_success) or ``"a:t"`` (on_terminal)."""
    return {
        "kind": "job",
        "key": key,
        "job_type": job_type,
        "payload": {"key": key},
        "depends_on": [_dependency(d) for d in deps],
        **extra,
    }


def ext(key: str, *deps: str) -> dict[str, Any]:
    return {"kind": "external", "key": key, "depends_on": [_dependency(d) for d in deps]}


def _dependency(spec: str) -> dict[str, str]:
    step, _, mode = spec.partition(":")
    return {"step": step, "mode": "on_terminal" if mode == "t" else "on_success"}


def spec(*steps: dict[str, Any], result_step: str | None = None, **extra: Any) -> dict[str, Any]:
    return {"workflow_type": "test", "steps": list(steps), "result_step": result_step, **extra}


def registry(failing: frozenset[str] = frozenset()) -> Registry:
    """``work`` returns ``{"key": …, "inputs": n}``; steps named in ``failing`` raise a
    permanent error (a dead letter at once)."""
    handlers = Registry()

    @handlers.handler("work")
    def work(ctx: Any) -> JSON:
        key = ctx.payload["key"]
        if key in failing:
            raise PermanentError(f"{key} fails")
        return {"key": key}

    return handlers


def statuses(ledger: Ledger, run_id: UUID) -> dict[str, str]:
    return {step.key: step.status.value for step in ledger.workflows.handle(run_id).steps()}


def assert_history_holds(ledger: Ledger) -> None:
    """The views equal a fold of the history, and every job's decisions replay."""
    report = ledger.projections().verify()
    assert report.clean, [view for view in report.views if view.drift_count]
    findings = [f for replay in ledger.replay_check_all() for f in replay.findings]
    assert findings == []
