"""``POST /api/v1/jobs`` and ``/jobs/batch`` over a real server process, on both backends:
201/200 for new and idempotent, the token named in ``job_enqueued.actor``, the org held to
the token's, 401/403/404/422 refusals appending nothing."""

from __future__ import annotations

from uuid import UUID

from ledger.api.ledger import Ledger
from ledger.core.events import JobEnqueued
from tests.http.conftest import Server


def _head(ledger: Ledger) -> int:
    with ledger.store.read_snapshot() as tables:
        return tables.head()


def _enqueued(ledger: Ledger, job_id: str) -> JobEnqueued:
    event = ledger.history(UUID(job_id))[0].event
    assert isinstance(event, JobEnqueued)
    return event


def test_enqueue_names_the_token_and_repeats_idempotently(defined: Ledger, server: Server) -> None:
    """An org token's enqueue is 201 into its org with actor = the token; the same key again
    is 200 with the same job and appends nothing; history shows the actor."""
    made = defined.tokens.create(org="acme", role="operate")
    as_acme = server.as_token(made.secret)
    body = {"type": "t", "payload": {"to": "x"}, "priority": 7, "idempotency_key": "k1"}
    first = server.client.post("/api/v1/jobs", json=body, headers=as_acme)
    assert first.status_code == 201, first.text
    job = first.json()["job"]
    assert first.json()["created"] is True
    assert (job["org"], job["priority"], job["status"]) == ("acme", 7, "pending")
    event = _enqueued(defined, job["job_id"])
    assert event.actor == f"api token {made.token.token_id}"
    before = _head(defined)
    again = server.client.post("/api/v1/jobs", json=body, headers=as_acme)
    assert again.status_code == 200, again.text
    assert again.json() == {"job": again.json()["job"], "created": False}
    assert again.json()["job"]["job_id"] == job["job_id"]
    assert _head(defined) == before
    shown = server.client.get(f"/api/v1/jobs/{job['job_id']}").json()
    assert shown["history"][0]["fields"]["actor"] == f"api token {made.token.token_id}"


def test_enqueue_refusals_append_nothing(defined: Ledger, server: Server) -> None:
    """No token 401, a read token 403, another org in the body 404, a bad body or an
    invalid payload 422 (the ledger's code), an unknown type 404; nothing appended."""
    reader = server.token("read", "acme")
    acme = server.token("operate", "acme")
    before = _head(defined)
    ok = {"type": "t"}
    assert (
        server.client.post("/api/v1/jobs", json=ok, headers=server.as_token(None)).status_code
        == 401
    )
    assert (
        server.client.post("/api/v1/jobs", json=ok, headers=server.as_token("jlt_x_y")).status_code
        == 401
    )
    assert (
        server.client.post("/api/v1/jobs", json=ok, headers=server.as_token(reader)).status_code
        == 403
    )
    other = server.client.post(
        "/api/v1/jobs", json={"type": "t", "org": "globex"}, headers=server.as_token(acme)
    )
    assert other.status_code == 404
    for bad in ({}, {"type": "t", "priority": "high"}, {"type": "t", "nope": 1}, []):
        response = server.client.post("/api/v1/jobs", json=bad)
        assert response.status_code == 422, (bad, response.text)
    invalid = server.client.post("/api/v1/jobs", json={"type": "t", "max_attempts": 0})
    assert invalid.status_code == 422
    assert invalid.json()["error"]["code"] == "request.invalid"
    unknown = server.client.post("/api/v1/jobs", json={"type": "undefined"})
    assert unknown.status_code == 404
    assert unknown.json()["error"]["code"] == "job.definition_not_found_or_disabled"
    batch = server.client.post("/api/v1/jobs/batch", json={"jobs": [ok, {"type": "undefined"}]})
    assert batch.status_code == 404  # all or none
    assert server.client.post("/api/v1/jobs/batch", json={"jobs": []}).status_code == 422
    assert _head(defined) == before


def test_batch_enqueue_is_one_transaction_naming_the_token(defined: Ledger, server: Server) -> None:
    """A batch answers one result per job in order; each job_enqueued names the token."""
    admin = defined.tokens.create(org=None, role="admin")
    jobs = [{"type": "t", "org": "acme", "idempotency_key": "b"}, {"type": "t"}]
    done = server.client.post(
        "/api/v1/jobs/batch",
        json={"jobs": [*jobs, jobs[0]]},
        headers=server.as_token(admin.secret),
    )
    assert done.status_code == 201, done.text
    results = done.json()["jobs"]
    assert [r["created"] for r in results] == [True, True, False]
    assert results[0]["job_id"] == results[2]["job_id"]
    for result in results[:2]:
        assert _enqueued(defined, result["job_id"]).actor == f"api token {admin.token.token_id}"
