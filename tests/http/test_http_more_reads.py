"""The HTTP API's other reads (dead letters, stats, audit, definitions, workflows) against a
real server process, on both backends."""

from __future__ import annotations

from uuid import uuid4

from ledger.api.ledger import Ledger
from ledger.core.values import Failure, FailureKind
from tests.http.conftest import Server


def _dead(ledger: Ledger, org: str) -> str:
    job_id = ledger.enqueue("t", {"org": org}, org=org, max_attempts=1).job_id
    claimed = ledger.claim("w1", limit=1)
    ledger.fail(claimed[0].lease, Failure(kind=FailureKind.TERMINAL, code="boom", message="x"))
    return str(job_id)


def test_dead_letters_stats_and_definitions(defined: Ledger, server: Server) -> None:
    """/dead-letters lists the dead job, /stats counts it, /definitions has type t."""
    dead = _dead(defined, "acme")
    letters = server.client.get("/api/v1/dead-letters").json()
    assert [letter["job_id"] for letter in letters] == [dead]
    assert letters[0]["failure"]["code"] == "boom"
    assert server.client.get("/api/v1/dead-letters", params={"type": "x"}).json() == []
    stats = server.client.get("/api/v1/stats").json()
    assert stats["by_status"]["dead"] == 1
    types = [d["job_type"] for d in server.client.get("/api/v1/definitions").json()]
    assert types == ["t"]


def test_audit_filters_and_pages(defined: Ledger, server: Server) -> None:
    """/audit takes the audit command's filters; a bad limit or event name is 422."""
    dead = _dead(defined, "acme")
    defined.enqueue("t", {}, org="globex")
    rows = server.client.get(
        "/api/v1/audit", params={"org": "acme", "order": "oldest", "limit": 2}
    ).json()
    assert [row["event"] for row in rows["rows"]] == ["job_enqueued", "job_leased"]
    assert {row["job_id"] for row in rows["rows"]} == {dead}
    rest = server.client.get(
        "/api/v1/audit",
        params={"org": "acme", "order": "oldest", "cursor": rows["next_cursor"]},
    ).json()
    assert [row["event"] for row in rest["rows"]][-1] == "job_dead_lettered"
    only = server.client.get("/api/v1/audit", params={"event": "job_dead_lettered"}).json()
    assert [row["job_id"] for row in only["rows"]] == [dead]
    assert server.client.get("/api/v1/audit", params={"limit": 0}).status_code == 422
    assert server.client.get("/api/v1/audit", params={"event": "nope"}).status_code == 422


def test_workflows_list_and_show(defined: Ledger, server: Server) -> None:
    """/workflows lists a started run; /workflows/{id} shows its steps; unknown is 404."""
    defined.define("work")
    started = defined.workflows.submit(
        {
            "workflow_type": "wf",
            "org": "acme",
            "steps": [{"kind": "job", "key": "a", "job_type": "work"}],
        }
    )
    runs = server.client.get("/api/v1/workflows").json()
    assert [run["run_id"] for run in runs["runs"]] == [str(started.run_id)]
    shown = server.client.get(f"/api/v1/workflows/{started.run_id}").json()
    assert [step["key"] for step in shown["steps"]] == ["a"]
    missing = server.client.get(f"/api/v1/workflows/{uuid4()}")
    assert missing.status_code == 404
    assert missing.json()["error"]["code"] == "workflow.not_found"
