"""The dead-letter requeue and the workflow writes over a real server process, on both
backends: success naming the token, 403 for a read token, 404 for another org's, nothing
appended by a refused request."""

from __future__ import annotations

from typing import Any
from uuid import UUID

from ledger.api.ledger import Ledger
from ledger.core.values import Failure, FailureKind
from tests.http.conftest import Server

GATED = {
    "workflow_type": "wf",
    "steps": [
        {"kind": "external", "key": "gate"},
        {"kind": "job", "key": "a", "job_type": "work", "depends_on": [{"step": "gate"}]},
    ],
}


def _head(ledger: Ledger) -> int:
    with ledger.store.read_snapshot() as tables:
        return tables.head()


def _run(ledger: Ledger, org: str) -> UUID:
    return ledger.workflows.submit({**GATED, "org": org}).run_id


def _dead(ledger: Ledger, org: str) -> UUID:
    job_id = ledger.enqueue("t", {}, org=org, max_attempts=1).job_id
    assert job_id is not None
    claimed = ledger.claim("w1", limit=1)
    ledger.fail(claimed[0].lease, Failure(kind=FailureKind.TERMINAL, code="boom", message="x"))
    return job_id


def _reason(record_event: Any) -> str:
    reason: str = record_event.reason
    return reason


def test_requeue_a_dead_letter(defined: Ledger, server: Server) -> None:
    """An operate token requeues its org's dead job (reason names it); a pending job is 409;
    a read token 403; another org's 404; the refusals append nothing."""
    operator = defined.tokens.create(org="acme", role="operate")
    reader, other = server.token("read", "acme"), server.token("operate", "globex")
    dead = _dead(defined, "acme")
    before = _head(defined)
    path = f"/api/v1/dead-letters/{dead}/requeue"
    assert server.client.post(path, headers=server.as_token(reader)).status_code == 403
    assert server.client.post(path, headers=server.as_token(other)).status_code == 404
    assert _head(defined) == before
    as_operator = server.as_token(operator.secret)
    done = server.client.post(path, json={"reason": "retry"}, headers=as_operator)
    assert done.status_code == 200, done.text
    assert done.json()["status"] == "pending"
    assert _reason(defined.history(dead)[-1].event) == f"api token {operator.token.token_id}: retry"
    again = server.client.post(path, headers=as_operator)
    assert again.status_code == 409
    assert server.client.get("/api/v1/dead-letters").json() == []


def test_complete_an_external_step_and_cancel_a_run(defined: Ledger, server: Server) -> None:
    """Completing the gate releases the next step; cancel ends the run; both events' reasons
    name the token; a read token is 403 and another org's 404, appending nothing."""
    defined.define("work")
    operator = defined.tokens.create(org="acme", role="operate")
    reader, other = server.token("read", "acme"), server.token("operate", "globex")
    run_id = _run(defined, "acme")
    complete = f"/api/v1/workflows/{run_id}/steps/gate/complete"
    cancel = f"/api/v1/workflows/{run_id}/cancel"
    before = _head(defined)
    for path in (complete, cancel):
        body = {"succeeded": True}
        assert (
            server.client.post(path, json=body, headers=server.as_token(reader)).status_code == 403
        )
        missing = server.client.post(path, json=body, headers=server.as_token(other))
        assert missing.status_code == 404
        assert missing.json()["error"]["code"] == "workflow.not_found"
    assert _head(defined) == before
    as_operator = server.as_token(operator.secret)
    done = server.client.post(
        complete, json={"succeeded": True, "reason": "ok"}, headers=as_operator
    )
    assert done.status_code == 200, done.text
    assert {s["key"]: s["status"] for s in done.json()["steps"]}["gate"] == "succeeded"
    completed = defined.workflows.history(run_id)
    gate = next(r.event for r in completed if r.event.name == "workflow_external_step_completed")
    assert _reason(gate) == f"api token {operator.token.token_id}: ok"
    cancelled = server.client.post(cancel, headers=as_operator)
    assert cancelled.status_code == 200, cancelled.text
    assert cancelled.json()["status"] == "cancelled"
    ended = next(
        r.event for r in defined.workflows.history(run_id) if r.event.name == "workflow_cancelled"
    )
    assert _reason(ended) == f"api token {operator.token.token_id}: cancelled over the API"
    unknown_step = f"/api/v1/workflows/{run_id}/steps/nope/complete"
    response = server.client.post(unknown_step, json={"succeeded": True}, headers=as_operator)
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "workflow.step_not_found"
