"""The dashboard's doors in a real Chromium against a real ``jobledger serve``: the login
link ``serve --token-file`` prints (a one-time code), a logout that ends the session on the
server, and an org token's pages held to the API's rule for what spans orgs."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from playwright.sync_api import Browser, expect

from ledger.api.ledger import Ledger
from tests.browser.conftest import Dashboard
from tests.http.conftest import Server
from tests.http.test_serve_process import LINK, serving

SQLITE_ONLY = pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)


def test_the_printed_login_link_logs_in_once_and_logout_ends_the_session(
    browser: Browser, sqlite_url: str, tmp_path: Path
) -> None:
    """The link ``serve --token-file`` prints opens the dashboard, its code dropped from the
    address bar; the same link in another browser is refused (used up); after Log out, the
    session's cookie, copied before, is refused by the server (a page redirects to login)."""
    token_file = tmp_path / "admin-token"
    with serving(sqlite_url, tmp_path, "--token-file", str(token_file)) as (_, _, output):
        match = LINK.search(output.read_text())
        assert match is not None
        base = match.group(1)
        ours = browser.new_context()
        page = ours.new_page()
        page.goto(match.group(0))
        page.wait_for_url(base + "/")
        assert "#code" not in page.url
        expect(page.locator(".who .token")).to_contain_text("admin")
        copied = {c["name"]: c["value"] for c in ours.cookies()}
        theirs = browser.new_context().new_page()
        theirs.goto(match.group(0))
        expect(theirs.locator(".error")).to_contain_text("not valid")
        assert theirs.url == base + "/login"
        page.click("text=Log out")
        page.wait_for_url(base + "/login")
        with httpx.Client(base_url=base, cookies=copied) as attacker:
            refused = attacker.get("/jobs", follow_redirects=False)
            assert (refused.status_code, refused.headers["location"]) == (303, "/login")
        ours.close()


@SQLITE_ONLY
def test_an_org_token_sees_neither_pools_nor_views(
    defined: Ledger, server: Server, dashboard: Dashboard
) -> None:
    """An org's read token: the overview shows its jobs but no worker pools or views, the
    menu has no Projections, and /projections is 403 as the API's is."""
    defined.enqueue("t", {}, org="acme")
    dashboard.login(server.token("read", "acme"))
    page = dashboard.open("/")
    expect(page.locator("#total-jobs")).to_have_text("1")
    expect(page.get_by_role("heading", name="Worker pools")).to_have_count(0)
    expect(page.locator("nav a", has_text="Projections")).to_have_count(0)
    dashboard.screenshot("org-overview")
    refused = page.request.get(dashboard.url("/projections"))
    assert refused.status == 403 and "auth.forbidden" in refused.text()
    dashboard.assert_clean()
