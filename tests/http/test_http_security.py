"""The HTTP surface as an attacker tries it, against a real ``jobledger serve``: a revoked
token's open streams, other origins' scripts, a logged-out cookie, a body nested a thousand
deep, an org token reading what spans orgs, ``/health`` without a token, a rebound ``Host``."""

from __future__ import annotations

import re
from typing import Any
from uuid import UUID, uuid4

import httpx
import pytest

from ledger.api.ledger import Ledger
from ledger.core.values import Failure, FailureKind
from tests.http.conftest import Server
from tests.http.test_http_stream import PATH as STREAM
from tests.http.test_http_stream import connected

SQLITE_ONLY = pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
OTHER_ORIGIN = re.compile(
    r"""(?:\b(?:src|href|action|srcset|poster|data)\s*=\s*["']?\s*(?:[a-z][a-z0-9+.-]*:)?//)"""
    r"""|(?:url\(\s*["']?\s*(?:[a-z][a-z0-9+.-]*:)?//)|(?:@import\s+["']?(?:[a-z]+:)?//)""",
    re.IGNORECASE,
)
"""An attribute or a CSS reference loading from another origin (``//host`` or
``scheme://host``); an XML namespace (``xmlns="http://…"``) loads nothing and is no match."""
DEEP = "[" * 1_000 + "]" * 1_000


def login(server: Server, secret: str) -> dict[str, str]:
    """The cookies a browser gets by logging in with ``secret`` through the login form."""
    with httpx.Client(base_url=server.base) as browser:
        answer = browser.post("/login", data={"token": secret}, follow_redirects=False)
        assert answer.status_code == 303, answer.text
        return dict(answer.cookies)


def head(ledger: Ledger) -> int:
    with ledger.store.read_snapshot() as tables:
        return tables.head()


def a_dead_job(ledger: Ledger, org: str) -> UUID:
    job_id = ledger.enqueue("t", {}, org=org, max_attempts=1).job_id
    assert job_id is not None
    [claimed] = ledger.claim("w1", limit=1)
    ledger.fail(claimed.lease, Failure(kind=FailureKind.TERMINAL, code="boom", message="no"))
    return job_id


def a_workflow(ledger: Ledger, org: str) -> UUID:
    ledger.define("work")
    step = {"kind": "job", "key": "a", "job_type": "work"}
    return ledger.workflows.submit({"workflow_type": "wf", "org": org, "steps": [step]}).run_id


def concrete(path: str, job: UUID, run: UUID) -> str:
    """A route's path with its parameters given real values (a job, a run, type ``t``)."""
    values = {
        "job_id": str(job),
        "run_id": str(run),
        "task_id": str(uuid4()),
        "job_type": "t",
        "queue": "default",
        "source_id": "nowhere",
        "step_key": "a",
        "path": "openapi.json",
        "file_path": "app.css",
    }
    return re.sub(r"\{(\w+)(?::\w+)?\}", lambda m: values[m.group(1)], path)


def routes(server: Server, method: str) -> list[str]:
    served = server.client.get("/api/v1/capabilities").json()["endpoints"]
    return [e["path"] for e in served if e["method"] == method]


# -- 14: revoking a token ends its streams ----------------------------------------------------


def test_revoking_a_token_ends_its_open_streams(defined: Ledger, server: Server) -> None:
    """A stream opened with an admin token that is then revoked (by another process) is sent
    nothing appended after the revocation, another org's events included, and is ended; a
    stream of another token goes on."""
    revoked = server.token("admin", None)
    token = defined.tokens.authenticate(revoked)
    assert token is not None
    with (
        connected(server, headers=server.as_token(revoked)) as doomed,
        connected(server, {"event": "job_enqueued"}) as other,
    ):
        defined.enqueue("t", {}, org="acme")
        assert doomed.next_message().event == "job_enqueued"
        assert other.next_message().data["org"] == "acme"
        defined.tokens.revoke(token.token_id, reason="test")
        defined.enqueue("t", {}, org="globex")
        after = doomed.rest()  # ends when the server ends the stream
        assert other.next_message().data["org"] == "globex"
    assert [line for line in after if line.startswith(("event:", "data:"))] == []


# -- 15: no other origin, a CSP on every HTML answer ------------------------------------------


@SQLITE_ONLY
def test_no_page_references_another_origin_and_every_html_answer_has_the_csp(
    defined: Ledger, server: Server
) -> None:
    """Every GET route the server lists (pages with a session, the rest with the admin
    token), a page's 404 and the login page: no HTML or CSS loads from another origin, and
    every HTML answer carries the content security policy of ``'self'`` only."""
    job, run = a_dead_job(defined, "acme"), a_workflow(defined, "acme")
    cookies = login(server, server.token("admin", None))
    paths = [concrete(p, job, run) for p in routes(server, "GET") if p != STREAM]
    paths += ["/login", f"/jobs/{uuid4()}", "/static/app.css"]
    html = 0
    with httpx.Client(base_url=server.base, cookies=cookies) as browser:
        for path in paths:
            page = not path.startswith("/api/") and path not in ("/metrics", "/health")
            answer = (browser if page else server.client).get(path)
            kind = answer.headers.get("content-type", "")
            if "html" in kind or "css" in kind:
                assert not OTHER_ORIGIN.search(answer.text), (
                    path,
                    OTHER_ORIGIN.search(answer.text),
                )
            if "html" in kind:
                html += 1
                policy = answer.headers.get("content-security-policy", "")
                assert "default-src 'self'" in policy and "script-src 'self'" in policy, path
                assert "http" not in policy, (path, policy)
    assert html >= 9  # the pages, their fragments, the login page and the 404 were looked at


@SQLITE_ONLY
def test_the_openapi_document_is_served_and_no_page_renders_it(server: Server) -> None:
    """``/api/v1/schema/openapi.json`` is the OpenAPI document (no token); the pages that
    rendered it with a CDN's scripts (``/redoc``, ``/swagger``, ...) are gone."""
    document = server.client.get("/api/v1/schema/openapi.json", headers=server.as_token(None))
    assert document.status_code == 200 and document.json()["openapi"].startswith("3.")
    for page in ("redoc", "swagger", "elements", "rapidoc"):
        assert server.client.get(f"/api/v1/schema/{page}").status_code == 404, page


# -- 16: logout ends the session on the server ------------------------------------------------


def test_a_logged_out_cookie_is_refused_everywhere(defined: Ledger, server: Server) -> None:
    """After logout the session's cookie, kept as a copy, is refused: a page sends it to the
    login page, the event stream is 401, and a stream it had open is ended."""
    del defined
    cookies = login(server, server.token("read", "acme"))
    with httpx.Client(base_url=server.base, cookies=cookies) as browser:
        assert browser.get("/jobs").status_code == 200
        with browser.stream("GET", STREAM, timeout=15.0) as open_stream:
            assert open_stream.status_code == 200
            lines = open_stream.iter_lines()
            assert next(lines) == ": connected"
            out = browser.post("/logout", headers={"HX-Request": "true"})
            assert (out.status_code, out.headers["hx-redirect"]) == (200, "/login")
            browser.cookies.update(cookies)  # the copy an attacker kept
            server.ledger.enqueue("t", {}, org="acme")  # wakes the stream: it checks
            rest = list(lines)
        assert [line for line in rest if line.startswith(("event:", "data:"))] == []
        again = browser.get("/jobs", follow_redirects=False)
        assert (again.status_code, again.headers["location"]) == (303, "/login")
        assert browser.get(STREAM).status_code == 401


# -- 17: a body nested a thousand deep --------------------------------------------------------


@SQLITE_ONLY
def test_a_body_nested_a_thousand_deep_is_422_on_every_write(
    defined: Ledger, server: Server
) -> None:
    """Every route taking a JSON body (from the OpenAPI document) answers a body nested
    1,000 levels deep with 422 ``request.invalid`` in the error shape, appending nothing."""
    job, run = a_dead_job(defined, "acme"), a_workflow(defined, "acme")
    document = server.client.get("/api/v1/schema/openapi.json").json()
    writes = [
        path
        for path, operations in document["paths"].items()
        if "requestBody" in operations.get("post", {})
    ]
    assert len(writes) >= 9, writes
    before = head(defined)
    for path in writes:
        url = concrete(path, job, run)
        answer = server.client.post(url, content=DEEP, headers={"Content-Type": "application/json"})
        assert answer.status_code == 422, (url, answer.status_code, answer.text)
        error: dict[str, Any] = answer.json()["error"]
        assert error["code"] == "request.invalid", url
        assert "nested too deep" in error["message"], url
    assert head(defined) == before


# -- 18: one rule for what spans orgs ---------------------------------------------------------


def allowed(answer: httpx.Response) -> bool:
    assert answer.status_code in (200, 303, 403, 404), (answer.url, answer.status_code)
    return answer.status_code == 200


@SQLITE_ONLY
def test_an_org_read_token_is_allowed_the_same_on_every_page_as_on_the_api(
    defined: Ledger, server: Server
) -> None:
    """For each dashboard page and the API route serving the same data, an org's read token
    is allowed both or refused both: the views and the pools (which span orgs) neither on
    the API nor on a page; its own org's jobs, dead letters and runs both; another org's
    job or run neither. An admin token of no org is allowed every one."""
    ours, theirs = a_dead_job(defined, "acme"), a_dead_job(defined, "globex")
    our_run, their_run = a_workflow(defined, "acme"), a_workflow(defined, "globex")
    pairs = [
        ("/projections", "/api/v1/projections"),
        ("/jobs", "/api/v1/jobs"),
        ("/dead-letters", "/api/v1/dead-letters"),
        ("/workflows", "/api/v1/workflows"),
        (f"/jobs/{ours}", f"/api/v1/jobs/{ours}"),
        (f"/jobs/{ours}/body", f"/api/v1/jobs/{ours}"),
        (f"/jobs/{theirs}", f"/api/v1/jobs/{theirs}"),
        (f"/workflows/{our_run}", f"/api/v1/workflows/{our_run}"),
        (f"/workflows/{their_run}", f"/api/v1/workflows/{their_run}"),
    ]
    overview = ["/", "/fragments/overview"]
    shapes = {re.sub(r"[0-9a-f-]{36}", "{}", page) for page, _ in pairs} | set(overview)
    pages = {
        re.sub(r"\{\w+:\w+\}", "{}", path)
        for path in routes(server, "GET")
        if not path.startswith(("/api/", "/static/")) and path not in ("/health", "/metrics")
    }
    assert pages - {"/login"} <= shapes, pages - shapes  # every page is looked at
    for role, org in (("read", "acme"), ("admin", None)):
        secret = server.token(role, org)
        bearer = server.as_token(secret)
        with httpx.Client(base_url=server.base, cookies=login(server, secret)) as browser:
            verdicts = [
                (page, allowed(browser.get(page)), allowed(server.client.get(api, headers=bearer)))
                for page, api in pairs
            ]
            assert [v for v in verdicts if v[1] != v[2]] == [], (role, verdicts)
            if org is None:
                assert all(page_ok for _, page_ok, _ in verdicts[:6]), verdicts
            else:
                assert [ok for _, ok, _ in verdicts] == [False, *[True] * 5, False, True, False]
            # The overview's pools and views, and /health's details: the same rule.
            health = server.client.get("/health", headers=bearer).json()
            for fragment in overview:
                text = browser.get(fragment).text
                assert ("Worker pools" in text) == ("pools" in health) == (org is None), fragment
                assert ("<h2>Projections</h2>" in text) == (org is None), fragment


# -- 19: /health without a token, and the Host header -----------------------------------------


@SQLITE_ONLY
def test_health_without_a_token_is_the_status_alone(server: Server) -> None:
    """``/health`` tells no one without a token (or with an org's) more than its status; a
    token of no org also gets the reasons, the views and the pools."""
    bare = server.client.get("/health", headers=server.as_token(None))
    assert (bare.status_code, bare.json()) == (200, {"status": "degraded"})
    org = server.client.get("/health", headers=server.as_token(server.token("read", "acme")))
    assert org.json() == {"status": "degraded"}
    full = server.client.get("/health").json()
    assert {"status", "reasons", "projections", "pools"} <= set(full)


@SQLITE_ONLY
def test_a_host_header_naming_another_site_is_refused(server: Server) -> None:
    """A request whose ``Host`` is a name the server was not given (DNS rebinding) is 400
    ``http.host_not_allowed`` on every route, ``/health`` and ``/login`` included;
    ``localhost`` and IP addresses are answered."""
    port = server.base.rsplit(":", 1)[1]
    for path in ("/health", "/login", "/api/v1/jobs"):
        refused = server.client.get(path, headers={"Host": f"attacker.example:{port}"})
        assert refused.status_code == 400, path
        assert refused.json()["error"]["code"] == "http.host_not_allowed"
    for host in (f"localhost:{port}", f"127.0.0.1:{port}", "127.0.0.1"):
        assert server.client.get("/api/v1/jobs", headers={"Host": host}).status_code == 200
