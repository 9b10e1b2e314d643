"""The HTTP API's reads against a real server process, on both backends."""

from __future__ import annotations

import subprocess
import sys
from uuid import uuid4

from ledger.api.ledger import Ledger
from tests.http.conftest import Server


def test_health_on_a_fresh_ledger_names_the_missing_pools(server: Server) -> None:
    """/health answers a token of no org with each view's lag, and degraded (200) with the
    pools' reason while no worker pool reports (without a token: the status alone,
    test_http_security.py)."""
    response = server.client.get("/health")
    assert response.status_code == 200
    body = response.json()
    assert body["projections"]["queue"] == {"lag": 0, "stale": False}
    assert body["status"] == "degraded"
    assert body["pools"] == []
    assert len(body["reasons"]) == 1 and "pool" in body["reasons"][0]


def test_jobs_list_filters_and_pages_as_the_jobs_command(defined: Ledger, server: Server) -> None:
    """GET /api/v1/jobs filters by type and org and pages by cursor, newest first."""
    ids = [defined.enqueue("t", {"n": n}, org="acme").job_id for n in range(3)]
    defined.enqueue("t", {"n": 9}, org="globex")
    first = server.client.get("/api/v1/jobs", params={"org": "acme", "limit": 2}).json()
    assert [job["job_id"] for job in first["jobs"]] == [str(ids[2]), str(ids[1])]
    assert first["at"] is None
    rest = server.client.get(
        "/api/v1/jobs", params={"org": "acme", "limit": 2, "cursor": first["next_cursor"]}
    ).json()
    assert [job["job_id"] for job in rest["jobs"]] == [str(ids[0])]
    assert rest["next_cursor"] is None
    pending = server.client.get("/api/v1/jobs", params={"status": ["pending", "dead"]}).json()
    assert len(pending["jobs"]) == 4
    none = server.client.get("/api/v1/jobs", params={"type": "other"}).json()
    assert none["jobs"] == []


def test_a_limit_out_of_range_is_422(server: Server) -> None:
    """limit 0, above the bound, or not a number is refused with 422 and the field named."""
    for limit in ("0", "10001", "many"):
        response = server.client.get("/api/v1/jobs", params={"limit": limit})
        assert response.status_code == 422, limit
        error = response.json()["error"]
        assert error["code"] == "request.invalid"
        assert error["fields"][0]["key"] == "limit"


def test_one_job_has_its_state_diagnostics_and_history(defined: Ledger, server: Server) -> None:
    """GET /api/v1/jobs/{id}: the show --json shape plus the history, event by event."""
    job_id = defined.enqueue("t", {"to": "a"}, org="acme").job_id
    body = server.client.get(f"/api/v1/jobs/{job_id}").json()
    assert body["job_id"] == str(job_id)
    assert body["status"] == "pending"
    assert body["workflow"] is None
    assert isinstance(body["diagnostics"], list)
    assert [event["event"] for event in body["history"]] == ["job_enqueued"]
    assert body["history"][0]["fields"]["request"]["payload"] == {"to": "a"}


def test_an_unknown_job_is_404_with_its_code(server: Server) -> None:
    """A job id that names no job is 404 job.not_found; a malformed id is 404 too."""
    response = server.client.get(f"/api/v1/jobs/{uuid4()}")
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "job.not_found"
    assert server.client.get("/api/v1/jobs/not-an-id").status_code == 404


def test_the_openapi_document_lists_the_routes(server: Server) -> None:
    """The OpenAPI 3.1 document is served under /api/v1/schema."""
    document = server.client.get("/api/v1/schema/openapi.json").json()
    assert document["openapi"].startswith("3.1")
    assert {"/health", "/api/v1/jobs", "/api/v1/jobs/{job_id}"} <= set(document["paths"])


def test_serve_refuses_a_public_host_without_tokens(sqlite_url: str) -> None:
    """With no token configured, serve on 0.0.0.0 exits 1 and says why."""
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "jobledger_cli.main",
            "--db",
            sqlite_url,
            "serve",
            "--host",
            "0.0.0.0",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 1
    assert "no token is configured" in done.stderr
