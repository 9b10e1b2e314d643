"""The dashboard in a real headless Chromium against a real server: every page loads clean,
a job's drawn story, requeue from the dead letters, the DAG, roles, org scoping, CSRF."""

from __future__ import annotations

from uuid import UUID

import httpx
import pytest
from playwright.sync_api import expect

from ledger import FakeClock
from ledger.api.ledger import Ledger
from ledger.core.values import Failure, FailureKind
from tests.browser.conftest import Dashboard
from tests.http.conftest import Server

SQLITE_ONLY = pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
DIAMOND = {
    "workflow_type": "diamond",
    "steps": [
        {"kind": "job", "key": "fetch", "job_type": "work"},
        {"kind": "job", "key": "left", "job_type": "work", "depends_on": [{"step": "fetch"}]},
        {"kind": "job", "key": "right", "job_type": "work", "depends_on": [{"step": "fetch"}]},
        {
            "kind": "job",
            "key": "join",
            "job_type": "work",
            "depends_on": [{"step": "left"}, {"step": "right"}],
        },
    ],
}


def _backend(server: Server) -> str:
    return server.ledger.store.backend


def _head(ledger: Ledger) -> int:
    with ledger.store.read_snapshot() as tables:
        return tables.head()


def _dead(ledger: Ledger, org: str) -> UUID:
    job_id = ledger.enqueue("t", {"n": 1}, org=org, max_attempts=1).job_id
    assert job_id is not None
    [claimed] = ledger.claim("w1", limit=1)
    ledger.fail(claimed.lease, Failure(kind=FailureKind.TERMINAL, code="boom", message="gave up"))
    return job_id


def _retried_and_reaped(ledger: Ledger, clock: FakeClock) -> UUID:
    """Leased, failed retryably, leased again, the lease let expire, reaped (retried)."""
    job_id = ledger.enqueue("t", {"n": 2}, org="acme").job_id
    assert job_id is not None
    clock.advance(1)
    [first] = ledger.claim("w1", limit=1, lease_s=30)
    clock.advance(2)
    ledger.heartbeat(first.lease, lease_s=30)
    clock.advance(3)
    ledger.fail(first.lease, Failure(kind=FailureKind.RETRYABLE, code="flaky", message="try again"))
    clock.advance(11)  # past the 10 s backoff
    [second] = ledger.claim("w2", limit=1, lease_s=30)
    assert second.attempt == 2
    clock.advance(45)  # the 30 s lease lapses with no heartbeat
    reaped = ledger.reap_expired()
    assert [state.job_id for state in reaped] == [job_id]
    return job_id


@SQLITE_ONLY
def test_every_page_loads_without_errors(
    defined: Ledger, server: Server, dashboard: Dashboard
) -> None:
    """Overview, jobs, a job, dead letters, workflows, a run, projections: no console error,
    no page error, no failed request; logged in through the login form (the printed
    link's one-time code: test_dashboard_security.py)."""
    defined.define("work")
    job_id = defined.enqueue("t", {"n": 0}, org="acme").job_id
    _dead(defined, "acme")
    run_id = defined.workflows.submit({**DIAMOND, "org": "acme"}).run_id
    secret = server.token("admin", None)
    dashboard.login(secret)
    expect(dashboard.page.locator("#total-jobs")).to_have_text("3")
    dashboard.page.wait_for_selector(".chart .uplot")
    dashboard.screenshot("overview")
    for name, path in [
        ("jobs", "/jobs"),
        ("job", f"/jobs/{job_id}"),
        ("dead-letters", "/dead-letters"),
        ("workflows", "/workflows"),
        ("workflow", f"/workflows/{run_id}"),
        ("projections", "/projections"),
        ("jobs-filtered", "/jobs?status=dead&type=t"),
    ]:
        dashboard.open(path)
        dashboard.screenshot(name)
    dashboard.assert_clean()


def test_job_page_draws_a_retried_and_reaped_job(
    defined: Ledger, clock: FakeClock, server: Server, dashboard: Dashboard
) -> None:
    """The drawing has one mark per event and the table one row per event, both in the
    history's order; a lane per lease; the expired lease drawn as a gap; the reap ringed
    as the diagnostics' evidence; the replay verdict consistent."""
    job_id = _retried_and_reaped(defined, clock)
    expected = [(r.originator_version, r.event.name) for r in defined.history(job_id)]
    assert [name for _, name in expected] == [
        "job_enqueued",
        "job_leased",
        "job_heartbeated",
        "job_failed",
        "job_retry_scheduled",
        "job_leased",
        "job_failed",
        "job_retry_scheduled",
    ]
    dashboard.login(server.token("read", "acme"))
    page = dashboard.open(f"/jobs/{job_id}")
    marks = page.locator("#timeline .mark-group")
    drawn = [
        (
            int(marks.nth(i).get_attribute("data-version") or 0),
            marks.nth(i).get_attribute("data-event"),
        )
        for i in range(marks.count())
    ]
    rows = page.locator("#events tbody tr")
    listed = [
        (
            int(rows.nth(i).get_attribute("data-version") or 0),
            rows.nth(i).get_attribute("data-event"),
        )
        for i in range(rows.count())
    ]
    assert drawn == expected and listed == expected
    assert page.locator("#timeline .lane-label").all_text_contents() == [
        "job",
        "run 1 · attempt 1",
        "run 1 · attempt 2",
    ]
    assert page.locator("#timeline .lease-gap").count() == 1
    reap = page.locator('#timeline .mark-group[data-version="7"]')
    assert reap.locator("circle.flag").count() == 1
    assert reap.locator("circle.mark.reap").count() == 1
    expect(page.locator("#replay-verdict")).to_contain_text("consistent")
    expect(page.locator('[data-finding="leases_lost"]')).to_contain_text("= 1")
    dashboard.screenshot(f"job-retried-and-reaped-{_backend(server)}")
    dashboard.assert_clean()


def test_requeue_from_the_dead_letter_page(
    defined: Ledger, server: Server, dashboard: Dashboard
) -> None:
    """An operate token's Requeue button: the row says requeued in place, the job leaves
    the list, and its history ends with job_requeued naming the token."""
    operator = defined.tokens.create(org="acme", role="operate", label="ops")
    dead = _dead(defined, "acme")
    dashboard.login(operator.secret)
    page = dashboard.open("/dead-letters")
    row = page.locator(f'#dead-letters tr[data-job="{dead}"]')
    row.locator("button.requeue").click()
    expect(page.locator(f'tr.requeued[data-job="{dead}"]')).to_contain_text("pending")
    last = defined.history(dead)[-1].event
    assert last.name == "job_requeued"
    reason: str = last.reason  # type: ignore[attr-defined]
    assert reason == f"api token {operator.token.token_id}: requeued from the dashboard"
    page.reload()
    expect(page.locator(f'#dead-letters tr[data-job="{dead}"]')).to_have_count(0)
    dashboard.screenshot(f"dead-letters-after-requeue-{_backend(server)}")
    dashboard.assert_clean()


@SQLITE_ONLY
def test_workflow_page_draws_one_node_per_step(
    defined: Ledger, server: Server, dashboard: Dashboard
) -> None:
    """The diamond's four steps are four nodes in three layers, four edges; the released
    root links to its job's page."""
    defined.define("work")
    run_id = defined.workflows.submit(DIAMOND).run_id
    dashboard.login(server.token("admin", None))
    page = dashboard.open(f"/workflows/{run_id}")
    steps = page.locator("#dag g.step")
    assert sorted(steps.nth(i).get_attribute("data-step") or "" for i in range(steps.count())) == [
        "fetch",
        "join",
        "left",
        "right",
    ]
    assert page.locator("#dag path.edge").count() == 4
    fetch = page.locator('#dag g.step[data-step="fetch"]')
    assert "st-enqueued" in (fetch.get_attribute("class") or "")
    fetch.locator("a").click()
    page.wait_for_url("**/jobs/*")
    dashboard.assert_clean()


@SQLITE_ONLY
def test_a_read_token_sees_no_requeue_button_and_is_refused(
    defined: Ledger, server: Server, dashboard: Dashboard
) -> None:
    """A read token's dead-letter page has no button; posting anyway (with the header) is
    403 and appends nothing."""
    dead = _dead(defined, "acme")
    dashboard.login(server.token("read", "acme"))
    page = dashboard.open("/dead-letters")
    expect(page.locator(f'tr[data-job="{dead}"]')).to_have_count(1)
    expect(page.locator("button.requeue")).to_have_count(0)
    before = _head(defined)
    refused = page.request.post(
        dashboard.url(f"/dead-letters/{dead}/requeue"), headers={"HX-Request": "true"}
    )
    assert refused.status == 403
    assert _head(defined) == before
    dashboard.assert_clean()


@SQLITE_ONLY
def test_an_org_token_sees_only_its_org(
    defined: Ledger, server: Server, dashboard: Dashboard
) -> None:
    """acme's token: acme's jobs and dead letters only, globex's job page is 404, and the
    overview counts only acme's."""
    ours = defined.enqueue("t", {}, org="acme").job_id
    theirs = defined.enqueue("t", {}, org="globex").job_id
    their_dead = _dead(defined, "globex")
    dashboard.login(server.token("read", "acme"))
    page = dashboard.open("/")
    expect(page.locator("#total-jobs")).to_have_text("1")
    page = dashboard.open("/jobs")
    listed = page.locator("#jobs tbody tr[data-job]")
    assert [listed.nth(i).get_attribute("data-job") for i in range(listed.count())] == [str(ours)]
    page = dashboard.open("/dead-letters")
    expect(page.locator(f'tr[data-job="{their_dead}"]')).to_have_count(0)
    response = page.request.get(dashboard.url(f"/jobs/{theirs}"))
    assert response.status == 404
    assert "job.not_found" in response.text()
    dashboard.screenshot("org-scoped-jobs")


@SQLITE_ONLY
def test_a_cookie_only_post_without_the_htmx_header_is_refused(
    defined: Ledger, server: Server, dashboard: Dashboard
) -> None:
    """CSRF: the session cookie alone (as a cross-site form would send it) cannot requeue:
    403, nothing appended; the same post with HX-Request works."""
    dead = _dead(defined, "acme")
    dashboard.login(server.token("operate", "acme"))
    cookies = {c["name"]: c["value"] for c in dashboard.page.context.cookies()}
    assert set(cookies) == {"jobledger_session"}
    [cookie] = dashboard.page.context.cookies()
    assert cookie["httpOnly"] and cookie["sameSite"] == "Strict"
    path = f"/dead-letters/{dead}/requeue"
    before = _head(defined)
    with httpx.Client(base_url=server.base, cookies=cookies) as browserish:
        refused = browserish.post(path, data={"anything": "1"})
        assert refused.status_code == 403
        assert _head(defined) == before
        assert browserish.post(path, headers={"HX-Request": "true"}).status_code == 200
    assert defined.history(dead)[-1].event.name == "job_requeued"


@SQLITE_ONLY
def test_login_refuses_a_wrong_token_and_logout_ends_the_session(
    defined: Ledger, server: Server, dashboard: Dashboard
) -> None:
    """A wrong secret is the form again (401) with no cookie; Log out clears the cookie and
    a page then sends the browser to the login page."""
    page = dashboard.page
    page.goto(dashboard.url("/login"))
    page.fill("#token", "jlt_nope")
    with page.expect_response(dashboard.url("/login")) as answer:
        page.click("button[type=submit]")
    assert answer.value.status == 401
    expect(page.locator(".error")).to_contain_text("not valid")
    assert page.context.cookies() == []
    dashboard.troubles.items.clear()  # the 401 itself is logged by Chromium as an error
    dashboard.login(server.token("read", "acme"))
    page.click("text=Log out")
    page.wait_for_url(dashboard.url("/login"))
    assert page.context.cookies() == []
    page.goto(dashboard.url("/jobs"))
    assert page.url == dashboard.url("/login")


def test_a_live_update_appears_without_reload(
    defined: Ledger, server: Server, dashboard: Dashboard
) -> None:
    """With the page open and its event stream connected, a claim appended by another
    process's ledger shows on the job page (status, a new mark, a new row) and a new job
    on the overview, both without a reload."""
    job_id = defined.enqueue("t", {}, org="acme").job_id
    dashboard.login(server.token("read", "acme"))
    page = dashboard.open(f"/jobs/{job_id}")
    expect(page.locator("#live-state")).to_have_text("live")
    expect(page.locator("#job-status")).to_have_text("pending")
    page.evaluate("window.jlNotReloaded = true")
    defined.claim("w1", limit=1)
    expect(page.locator("#job-status")).to_have_text("leased")
    expect(page.locator('#timeline .mark-group[data-event="job_leased"]')).to_have_count(1)
    expect(page.locator('#events tr[data-event="job_leased"]')).to_have_count(1)
    assert page.evaluate("window.jlNotReloaded") is True
    page = dashboard.open("/")
    expect(page.locator("#live-state")).to_have_text("live")
    expect(page.locator("#total-jobs")).to_have_text("1")
    page.evaluate("window.jlNotReloaded = true")
    defined.enqueue("t", {}, org="acme")
    expect(page.locator("#total-jobs")).to_have_text("2")
    assert page.evaluate("window.jlNotReloaded") is True
    dashboard.screenshot(f"overview-live-{_backend(server)}")
    dashboard.assert_clean()
