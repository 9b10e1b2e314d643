"""Tokens, roles and tenancy over a real server process, on both backends: 401, 403, 404
for another org, nothing appended by a refused request, a mutation's event naming its token."""

from __future__ import annotations

from uuid import UUID

from ledger.api.ledger import Ledger
from ledger.core.values import Failure, FailureKind
from tests.http.conftest import Server


def _head(ledger: Ledger) -> int:
    with ledger.store.read_snapshot() as tables:
        return tables.head()


def _dead(ledger: Ledger, org: str) -> UUID:
    job_id = ledger.enqueue("t", {"org": org}, org=org, max_attempts=1).job_id
    assert job_id is not None
    claimed = ledger.claim("w1", limit=1)
    ledger.fail(claimed[0].lease, Failure(kind=FailureKind.TERMINAL, code="boom", message="x"))
    return job_id


def test_no_wrong_or_revoked_token_is_401_with_a_bearer_challenge(
    defined: Ledger, server: Server
) -> None:
    """Every route but /health and the schema needs a valid token: 401 + WWW-Authenticate."""
    revoked = defined.tokens.create(org="acme", role="read")
    defined.tokens.revoke(revoked.token.token_id)
    job_id = defined.enqueue("t", {}, org="acme").job_id
    wrong = [None, "nonsense", revoked.secret, revoked.secret[:-2] + "xx", "jlt_zz_yy"]
    for secret in wrong:
        for path in ("/api/v1/jobs", f"/api/v1/jobs/{job_id}", "/api/v1/stats"):
            response = server.client.get(path, headers=server.as_token(secret))
            assert response.status_code == 401, (secret, path)
            assert response.headers["www-authenticate"] == "Bearer"
            assert response.json()["error"]["code"] == "auth.unauthenticated"
    plain = server.client.get("/health", headers=server.as_token(None))
    assert plain.status_code == 200
    assert server.client.get(
        "/api/v1/schema/openapi.json", headers={"Authorization": ""}
    ).is_success


def test_a_read_token_may_not_mutate_and_appends_nothing(defined: Ledger, server: Server) -> None:
    """A read token's retry or cancel is 403, and the history is as it was."""
    reader = server.token("read", "acme")
    job_id = defined.enqueue("t", {}, org="acme").job_id
    before = _head(defined)
    for action in ("cancel", "retry"):
        response = server.client.post(
            f"/api/v1/jobs/{job_id}/{action}", headers=server.as_token(reader)
        )
        assert response.status_code == 403, action
        assert response.json()["error"]["code"] == "auth.forbidden"
    unauthenticated = server.client.post(
        f"/api/v1/jobs/{job_id}/cancel", headers=server.as_token(None)
    )
    assert unauthenticated.status_code == 401
    assert _head(defined) == before
    assert server.client.get(f"/api/v1/jobs/{job_id}").json()["status"] == "pending"


def test_an_org_token_sees_and_touches_only_its_org(defined: Ledger, server: Server) -> None:
    """Org A's token: B's job, run and rows are 404 or absent on every endpoint, its own are
    there; asking for org B by filter is 404; nothing is appended by a refused request."""
    acme = server.token("operate", "acme")
    mine, theirs = _dead(defined, "acme"), _dead(defined, "globex")
    pending = defined.enqueue("t", {}, org="globex").job_id
    defined.define("work")
    step = {"kind": "job", "key": "a", "job_type": "work"}
    run_b = defined.workflows.submit({"workflow_type": "wf", "org": "globex", "steps": [step]})
    run_a = defined.workflows.submit({"workflow_type": "wf", "org": "acme", "steps": [step]})
    as_acme = server.as_token(acme)
    before = _head(defined)
    for path in (f"/api/v1/jobs/{theirs}", f"/api/v1/workflows/{run_b.run_id}"):
        assert server.client.get(path, headers=as_acme).status_code == 404, path
    for action, job in (("retry", theirs), ("cancel", pending)):
        response = server.client.post(f"/api/v1/jobs/{job}/{action}", headers=as_acme)
        assert response.status_code == 404, action
        assert response.json()["error"]["code"] == "job.not_found"
    for path in (
        "/api/v1/jobs",
        "/api/v1/dead-letters",
        "/api/v1/audit",
        "/api/v1/workflows",
        "/api/v1/stats",
    ):
        other = server.client.get(path, params={"org": "globex"}, headers=as_acme)
        assert other.status_code == 404, path
    assert _head(defined) == before
    jobs = server.client.get("/api/v1/jobs", headers=as_acme).json()["jobs"]
    assert {job["org"] for job in jobs} == {"acme"}
    letters = server.client.get("/api/v1/dead-letters", headers=as_acme).json()
    assert [letter["job_id"] for letter in letters] == [str(mine)]
    rows = server.client.get("/api/v1/audit", headers=as_acme).json()["rows"]
    assert rows and {row["org"] for row in rows} == {"acme"}
    runs = server.client.get("/api/v1/workflows", headers=as_acme).json()["runs"]
    assert [run["run_id"] for run in runs] == [str(run_a.run_id)]
    assert server.client.get(f"/api/v1/jobs/{mine}", headers=as_acme).status_code == 200
    stats = server.client.get("/api/v1/stats", headers=as_acme).json()
    assert sum(stats["by_status"].values()) == len(jobs)
    assert stats["by_status"]["dead"] == 1
    assert (
        server.client.get("/api/v1/stats", params={"org": "globex"}, headers=as_acme).status_code
        == 404
    )
    everyone = server.client.get("/api/v1/stats").json()
    assert sum(everyone["by_status"].values()) == len(jobs) + 3  # globex: 2 jobs and a step
    every = server.client.get("/api/v1/jobs").json()["jobs"]  # the admin token, no org
    assert {job["org"] for job in every} == {"acme", "globex"}


def test_a_mutation_is_an_event_naming_its_token(defined: Ledger, server: Server) -> None:
    """An operate token's retry and cancel append job_requeued / job_cancelled whose reason
    names the token's id; cancelling again is 409."""
    operator = defined.tokens.create(org="acme", role="operate")
    as_operator = server.as_token(operator.secret)
    dead = _dead(defined, "acme")
    retried = server.client.post(
        f"/api/v1/jobs/{dead}/retry", json={"reason": "fixed the bug"}, headers=as_operator
    )
    assert retried.status_code == 200, retried.text
    assert retried.json()["status"] == "pending"
    event = defined.history(dead)[-1].event
    assert event.name == "job_requeued"
    assert event.reason == f"api token {operator.token.token_id}: fixed the bug"  # type: ignore[attr-defined]
    cancelled = server.client.post(f"/api/v1/jobs/{dead}/cancel", headers=as_operator)
    assert cancelled.status_code == 200
    last = defined.history(dead)[-1].event
    assert last.name == "job_cancelled"
    assert last.reason == f"api token {operator.token.token_id}: cancelled over the API"  # type: ignore[attr-defined]
    again = server.client.post(f"/api/v1/jobs/{dead}/cancel", headers=as_operator)
    assert again.status_code == 409
    assert again.json()["error"]["code"] == "job.invalid_transition"
