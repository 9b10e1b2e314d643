"""A real headless Chromium (Debian's ``chromium``, driven by Playwright; never
``playwright install``) against a real ``jobledger serve`` process (tests/http/conftest.py's
``server`` fixture), logged in through the login page.

Without Chromium the tests fail under CI (``CI`` set) and are skipped, saying why, elsewhere."""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from playwright.sync_api import (
    Browser,
    ConsoleMessage,
    Page,
    Playwright,
    Request,
    sync_playwright,
)

from tests.http.conftest import Server, server  # noqa: F401 (the fixture, re-exported)

CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
STREAM = "/api/v1/events/stream"
ARTIFACTS = Path(
    os.environ.get("JOBLEDGER_ARTIFACTS") or Path(__file__).parent.parent / "artifacts"
)


def chromium_path() -> str:
    found = shutil.which("chromium") or (
        "/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else None
    )
    if found is None:
        message = "Chromium is missing: `apt-get install -y chromium` (.ci/run installs it)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return found


@pytest.fixture(scope="module")
def playwright() -> Iterator[Playwright]:
    # Module, not session: the sync driver keeps an event loop running in this thread
    # while it is open, which the asyncio tests of later modules cannot share.
    with sync_playwright() as driver:
        yield driver


@pytest.fixture(scope="module")
def browser(playwright: Playwright) -> Iterator[Browser]:
    launched = playwright.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_ARGS)
    try:
        yield launched
    finally:
        launched.close()


@dataclass
class Troubles:
    """What a page should never do: log an error, throw, or fail a request."""

    items: list[str] = field(default_factory=list)

    def console(self, message: ConsoleMessage) -> None:
        if message.type == "error":
            self.items.append(f"console: {message.text}")

    def request_failed(self, request: Request) -> None:
        # Leaving a page aborts what it still had open: its event stream, and the favicon
        # when the test navigates on at once. Anything else failing is a fault (a 4xx/5xx
        # answer is not a failed request: it is a console error, caught above).
        left_page = request.failure == "net::ERR_ABORTED" and (
            STREAM in request.url or request.url.endswith("/favicon.svg")
        )
        if not left_page:
            self.items.append(f"requestfailed: {request.url} {request.failure}")


@dataclass
class Dashboard:
    server: Server
    page: Page
    troubles: Troubles

    def url(self, path: str) -> str:
        return self.server.base + path

    def login(self, secret: str) -> None:
        """Through the login form, as an operator types it."""
        self.page.goto(self.url("/login"))
        self.page.fill("#token", secret)
        self.page.click("button[type=submit]")
        self.page.wait_for_url(self.url("/"))

    def open(self, path: str) -> Page:
        response = self.page.goto(self.url(path))
        assert response is not None and response.ok, (path, response and response.status)
        return self.page

    def screenshot(self, name: str) -> None:
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        safe = re.sub(r"[^a-z0-9_.-]+", "_", name.lower())
        self.page.screenshot(path=str(ARTIFACTS / f"{safe}.png"), full_page=True)

    def assert_clean(self) -> None:
        assert self.troubles.items == [], self.troubles.items


@pytest.fixture
def dashboard(browser: Browser, server: Server) -> Iterator[Dashboard]:  # noqa: F811
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    troubles = Troubles()
    page.on("console", troubles.console)
    page.on("pageerror", lambda error: troubles.items.append(f"pageerror: {error}"))
    page.on("requestfailed", troubles.request_failed)
    try:
        yield Dashboard(server, page, troubles)
    finally:
        context.close()
