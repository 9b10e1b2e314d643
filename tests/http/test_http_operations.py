"""Enable/disable, dead letters requeued by type, sources, projections and their verify
task, capabilities and the audit's JSON Lines stream over a real server process, on both
backends: success, the events naming the token, 401/403/404/422, nothing appended by a
refused request."""

from __future__ import annotations

import json
from typing import Any
from uuid import UUID

import httpx

from ledger.api.ledger import Ledger
from ledger.core.events import JobTypeUpdated
from ledger.core.values import Failure, FailureKind, Subject
from tests.http.conftest import Server
from tests.projections.projection_helpers import raw

POLL_LIMIT = 600
"""How many times a test asks for a verify task's result before giving up (each request
waits on the server's answer; no sleep)."""


def _head(ledger: Ledger) -> int:
    with ledger.store.read_snapshot() as tables:
        return tables.head()


def _dead(ledger: Ledger, org: str, job_type: str = "t") -> UUID:
    job_id = ledger.enqueue(job_type, {}, org=org, max_attempts=1).job_id
    assert job_id is not None
    claimed = ledger.claim("w1", limit=1)
    ledger.fail(claimed[0].lease, Failure(kind=FailureKind.TERMINAL, code="boom", message="x"))
    return job_id


def _synced(ledger: Ledger, org: str, source: str, uri: str, revision: str) -> UUID:
    job_id = ledger.enqueue("t", {}, org=org, subject=Subject(source_id=source, uri=uri)).job_id
    assert job_id is not None
    (claimed,) = ledger.claim("w1", limit=1)
    ledger.succeed(claimed.lease, revision=revision)
    return job_id


def test_enable_and_disable_name_the_token(defined: Ledger, server: Server) -> None:
    """An admin token disables and enables a type (job_type_updated.actor names it); an
    org's token, even admin, and an operate token are 403; unknown type 404."""
    admin = defined.tokens.create(org=None, role="admin")
    as_admin = server.as_token(admin.secret)
    refused_tokens = (server.token("operate", "acme"), server.token("admin", "acme"))
    before = _head(defined)
    for secret in refused_tokens:
        refused = server.client.post(
            "/api/v1/definitions/t/disable", headers=server.as_token(secret)
        )
        assert refused.status_code == 403
    missing = server.client.post("/api/v1/definitions/nope/disable", headers=as_admin)
    assert missing.status_code == 404
    assert _head(defined) == before
    off = server.client.post("/api/v1/definitions/t/disable", headers=as_admin)
    assert off.status_code == 200, off.text
    assert off.json()["enabled"] is False
    assert defined.definition("t") is not None and not defined.definition("t").enabled  # type: ignore[union-attr]
    refused_enqueue = server.client.post("/api/v1/jobs", json={"type": "t"})
    assert refused_enqueue.status_code == 404
    on = server.client.post("/api/v1/definitions/t/enable", headers=as_admin)
    assert on.json()["enabled"] is True
    updates = [r.event for r in defined.store.history(_type_stream(defined, "t"))[1:]]
    assert [type(e) for e in updates] == [JobTypeUpdated, JobTypeUpdated]
    assert {e.actor for e in updates} == {f"api token {admin.token.token_id}"}  # type: ignore[attr-defined]


def _type_stream(ledger: Ledger, job_type: str) -> UUID:
    from ledger.store.streams import job_type_stream_id

    return job_type_stream_id(job_type)


def test_requeue_dead_letters_by_type(defined: Ledger, server: Server) -> None:
    """An org token requeues its org's dead jobs of the type (limit respected), reasons
    naming it; another org's stay dead; read 403, another org 404, bad limit 422."""
    defined.define("u")
    operator = defined.tokens.create(org="acme", role="operate")
    mine = [_dead(defined, "acme") for _ in range(3)]
    other_type = _dead(defined, "acme", "u")
    theirs = _dead(defined, "globex")
    path = "/api/v1/dead-letters/requeue"
    reader = server.as_token(server.token("read", "acme"))
    before = _head(defined)
    assert server.client.post(path, json={"type": "t"}, headers=reader).status_code == 403
    as_operator = server.as_token(operator.secret)
    for body, status in (
        ({"type": "t", "org": "globex"}, 404),
        ({"type": "t", "limit": 0}, 422),
        ({"limit": 1}, 422),
    ):
        assert server.client.post(path, json=body, headers=as_operator).status_code == status
    assert _head(defined) == before
    done = server.client.post(path, json={"type": "t", "limit": 2}, headers=as_operator)
    assert done.status_code == 200, done.text
    first = done.json()
    assert (first["requeued"], first["refused"]) == (2, [])
    assert set(first["job_ids"]) < {str(j) for j in mine}
    rest = server.client.post(path, json={"type": "t", "reason": "fixed"}, headers=as_operator)
    (last,) = rest.json()["job_ids"]
    assert {*first["job_ids"], last} == {str(j) for j in mine}
    token = f"api token {operator.token.token_id}"
    for job_id in mine:
        reason = defined.history(job_id)[-1].event.reason  # type: ignore[attr-defined]
        why = "fixed" if str(job_id) == last else "requeued by type over the API"
        assert reason == f"{token}: {why}"
    left = {letter.job_id for letter in defined.dead_letters()}
    assert left == {other_type, theirs}


def test_sources_are_org_scoped(defined: Ledger, server: Server) -> None:
    """/sources sums up each source; an org's token sees only the subjects only its jobs
    touched (a URI both orgs synced is hidden from both); another org's source is 404."""
    _synced(defined, "acme", "docs", "a", "r1")
    _synced(defined, "acme", "docs", "shared", "r2")
    _synced(defined, "globex", "docs", "shared", "r3")
    _synced(defined, "globex", "wiki", "w", "r4")
    every = server.client.get("/api/v1/sources").json()
    assert [(s["source_id"], s["uris"], s["jobs"]) for s in every] == [
        ("docs", 2, {"succeeded": 3}),
        ("wiki", 1, {"succeeded": 1}),
    ]
    shown = server.client.get("/api/v1/sources/docs").json()
    assert [(row["uri"], row["revision"]) for row in shown["rows"]] == [
        ("a", "r1"),
        ("shared", "r3"),
    ]
    as_acme = server.as_token(server.token("read", "acme"))
    mine = server.client.get("/api/v1/sources", headers=as_acme).json()
    assert [(s["source_id"], s["uris"], s["jobs"]) for s in mine] == [("docs", 1, {"succeeded": 2})]
    docs = server.client.get("/api/v1/sources/docs", headers=as_acme).json()
    assert [row["uri"] for row in docs["rows"]] == ["a"]
    for path, params in (("/api/v1/sources/wiki", {}), ("/api/v1/sources", {"org": "globex"})):
        response = server.client.get(path, params=params, headers=as_acme)
        assert response.status_code == 404, path
    assert server.client.get("/api/v1/sources/none").json()["error"]["code"] == "source.not_found"


def _poll(server: Server, task_id: str) -> dict[str, Any]:
    for _ in range(POLL_LIMIT):
        task: dict[str, Any] = server.client.get(f"/api/v1/projections/verify/{task_id}").json()
        if task["status"] != "running":
            return task
    raise AssertionError("the verify task did not finish")


def test_projections_status_and_verify_task(defined: Ledger, server: Server, db_url: str) -> None:
    """/projections lists each view's lag; verify is a task: ok on a clean ledger, then
    differences after a view row is corrupted; org tokens 403, operate 403, unknown 404."""
    _synced(defined, "acme", "docs", "a", "r1")
    statuses = {s["name"]: s for s in server.client.get("/api/v1/projections").json()}
    assert statuses["queue"]["lag"] == 0 and statuses["queue"]["stale"] is False
    org_token = server.as_token(server.token("admin", "acme"))
    assert server.client.get("/api/v1/projections", headers=org_token).status_code == 403
    assert server.client.post("/api/v1/projections/verify", headers=org_token).status_code == 403
    operate = server.as_token(server.token("operate", "acme"))
    assert server.client.post("/api/v1/projections/verify", headers=operate).status_code == 403
    started = server.client.post("/api/v1/projections/verify")
    assert started.status_code in (200, 202), started.text
    clean = _poll(server, started.json()["task_id"])
    assert clean["status"] == "ok" and clean["report"]["clean"] is True
    raw(db_url, "UPDATE jl_sync_state SET revision = 'zz' WHERE uri = 'a'")
    again = server.client.post("/api/v1/projections/verify")
    drift = _poll(server, again.json()["task_id"])
    assert drift["status"] == "differences"
    assert drift["report"]["clean"] is False
    unknown = "/api/v1/projections/verify/00000000-0000-0000-0000-000000000000"
    assert server.client.get(unknown).status_code == 404


def test_capabilities(server: Server) -> None:
    """The version, backend, roles, the caller's token and every route."""
    body = server.client.get("/api/v1/capabilities").json()
    assert body["backend"] in ("sqlite", "postgres")
    assert body["roles"] == ["read", "operate", "admin"]
    assert body["token"] == {"role": "admin", "org": None}
    assert {"method": "POST", "path": "/api/v1/jobs"} in body["endpoints"]
    assert (
        server.client.get("/api/v1/capabilities", headers=server.as_token(None)).status_code == 401
    )


def test_audit_streams_json_lines_through_every_page(defined: Ledger, server: Server) -> None:
    """format=jsonl (or Accept: application/x-ndjson) streams every matching row across
    pages of `limit`, held to the token's org."""
    for _ in range(3):
        _dead(defined, "acme")
    _dead(defined, "globex")
    with server.client.stream(
        "GET", "/api/v1/audit", params={"format": "jsonl", "limit": 2, "order": "oldest"}
    ) as response:
        assert response.headers["content-type"].startswith("application/x-ndjson")
        lines = [json.loads(line) for line in response.iter_lines() if line]
    assert len(lines) == 4 * 4  # enqueued, leased, failed, dead-lettered per job
    assert [row["position"] for row in lines] == sorted(row["position"] for row in lines)
    as_acme = server.as_token(server.token("read", "acme"))
    acme = httpx.get(
        f"{server.base}/api/v1/audit",
        params={"limit": 3},
        headers={**as_acme, "Accept": "application/x-ndjson"},
    )
    rows = [json.loads(line) for line in acme.text.splitlines()]
    assert len(rows) == 12 and {row["org"] for row in rows} == {"acme"}


def test_pause_and_resume_a_queue_name_the_token(defined: Ledger, server: Server) -> None:
    """An admin token of no org pauses and resumes a queue (the events' actor names it); an
    org's token (admin or operate) is 403 and appends nothing."""
    operator = defined.tokens.create(org=None, role="admin")
    headers = server.as_token(operator.secret)
    org_tokens = [server.as_token(server.token(role, "acme")) for role in ("admin", "operate")]
    before = _head(defined)
    for org_token in org_tokens:
        refused = server.client.post("/api/v1/queues/mail/pause", headers=org_token)
        assert refused.status_code == 403
    assert _head(defined) == before
    paused = server.client.post(
        "/api/v1/queues/mail/pause", headers=headers, json={"reason": "smtp down"}
    )
    assert paused.status_code == 200, paused.text
    assert paused.json()["paused"] is True
    defined.enqueue("t", {}, queue="mail")
    assert defined.claim("w1", limit=5) == []
    resumed = server.client.post("/api/v1/queues/mail/resume", headers=headers)
    assert resumed.json()["paused"] is False
    assert len(defined.claim("w1", limit=5)) == 1
    [state] = [q for q in defined.limits.queues() if q.queue == "mail"]
    assert state.actor == f"api token {operator.token.token_id}"


def _poll_integrity(server: Server, task_id: str) -> dict[str, Any]:
    for _ in range(POLL_LIMIT):
        task: dict[str, Any] = server.client.get(f"/api/v1/integrity/verify/{task_id}").json()
        if task["status"] != "running":
            return task
    raise AssertionError("the integrity verify task did not finish")


def test_the_chains_head_and_its_verify_task(defined: Ledger, server: Server, db_url: str) -> None:
    """/integrity gives the head an operator publishes; verify is an admin's task, ok on an
    untouched history, then naming an event edited by SQL; org tokens 403."""
    _dead(defined, "acme")
    defined.integrity.catch_up()
    head = server.client.get("/api/v1/integrity").json()
    assert head["started"] is True and head["events"] > 0 and head["unwitnessed"] == 0
    assert head["short_head"] == f"{head['events']}:{head['head'][:32]}"
    org_token = server.as_token(server.token("admin", "acme"))
    assert server.client.get("/api/v1/integrity", headers=org_token).status_code == 403
    assert server.client.post("/api/v1/integrity/verify", headers=org_token).status_code == 403
    clean = _poll_integrity(
        server, server.client.post("/api/v1/integrity/verify").json()["task_id"]
    )
    assert clean["status"] == "ok" and clean["report"]["ok"] is True
    column = "notification_id" if db_url.startswith("postgresql") else "rowid"
    raw(db_url, f"UPDATE jl_events SET topic = topic || 'x' WHERE {column} = 3")
    edited = _poll_integrity(
        server, server.client.post("/api/v1/integrity/verify").json()["task_id"]
    )
    assert edited["status"] == "differences"
    found = edited["report"]["first_divergence"]
    assert (found["kind"], found["position"]) == ("changed", 3)
