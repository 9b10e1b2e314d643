"""The pages name only ``jobledger`` commands, options and HTTP routes that exist (issue 28,
item 21): the CLI is walked through its click app, its lazy groups loaded, and the routes
listed from the Litestar app, at test time, so a page follows whatever the code now has."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import click
import pytest
from doc_names import Finding, Route, command_findings, route_findings, unknown_names
from litestar.routes import ASGIRoute, HTTPRoute

from jobledger_cli.main import cli
from ledger import Ledger
from ledger.http.app import API_PREFIX, build_app

ROOT = Path(__file__).resolve().parents[2]
PAGES = sorted([ROOT / "README.md", *(ROOT / "docs").rglob("*.md")])

ALLOWED: dict[tuple[str, str], str] = {
    # (page, mention as reported) -> why the page may name it.
    ("docs/architecture.md", "jobledger migrate --partition"): (
        "names a conversion that is not built, and says so"
    ),
    ("docs/operations.md", "jobledger migrate --partition"): (
        "names a conversion that is not built, and says so"
    ),
}
"""Names a page may mention although the code lacks them, each with its reason; keep it short."""


@pytest.fixture(scope="module")
def routes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[Route]]:
    """Every route of the app ``jobledger serve`` serves, with its methods."""
    path = tmp_path_factory.mktemp("doc-names") / "routes.db"
    with Ledger.open(str(path), create=True) as ledger:
        app = build_app(ledger)
        found = []
        for route in app.routes:
            if isinstance(route, HTTPRoute):
                found.append(Route(route.path, frozenset(route.methods)))
            elif isinstance(route, ASGIRoute):
                found.append(Route(route.path, frozenset({"GET", "HEAD"}), mount=True))
        # The API's prefix: named as where the API lives ("under `/api/v1`"), served by no
        # method.
        found.append(Route(API_PREFIX, frozenset()))
        yield found
        app.state.event_hub.close()


def _label(page: Path) -> str:
    return str(page.relative_to(ROOT))


def _not_allowed(findings: list[Finding]) -> list[str]:
    return [str(f) for f in findings if (f.page, f.mention) not in ALLOWED]


@pytest.mark.parametrize("page", PAGES, ids=_label)
def test_the_page_names_only_commands_and_options_that_exist(page: Path) -> None:
    """Every ``jobledger …`` the page shows in code is a command path of the CLI, with
    options that command has (or an allowed mention)."""
    assert _not_allowed(command_findings(page, cli, _label(page))) == []


@pytest.mark.parametrize("page", PAGES, ids=_label)
def test_the_page_names_only_routes_that_exist(page: Path, routes: list[Route]) -> None:
    """Every HTTP route the page shows in code (``GET /api/v1/jobs/{id}``, an API path, a
    dashboard path) is served by the app, with that method."""
    assert _not_allowed(route_findings(page, routes, _label(page))) == []


def test_every_allowed_mention_is_still_on_its_page_and_still_missing() -> None:
    """The allow-list holds no stale entry: each is found on its page and still reported."""
    reported = {
        (f.page, f.mention) for page in PAGES for f in command_findings(page, cli, _label(page))
    }
    assert sorted(set(ALLOWED) - reported) == []


def test_a_bogus_command_option_or_route_is_reported(tmp_path: Path, routes: list[Route]) -> None:
    """A page naming a command, subcommand, option or route the code lacks fails, with the
    line; real ones, placeholders and options of the command reached pass."""
    page = tmp_path / "page.md"
    page.write_text(
        "Run `jobledger frobnicate --all` or `jobledger cancel JOB --reason x`.\n"
        "```sh\n"
        "$ jobledger --db URL projections rebuild queue --json\n"
        "$ jobledger projections explode\n"
        "$ jobledger migrate --dry-run --wait 5 | tail -1\n"
        "$ jobledger migrate --partitions 2 && jobledger COMMAND --help\n"
        "```\n"
        "Call `GET /api/v1/jobs/{id}` and `DELETE /api/v1/jobs/{id}`, `POST /api/v1/nothing`, "
        "see `/health` and `/api/v1/jobs?status=pending`.\n",
        encoding="utf-8",
    )
    commands = [(f.line, f.problem) for f in command_findings(page, cli, "page.md")]
    assert commands == [
        (1, "`jobledger` has no command 'frobnicate'"),
        (4, "`jobledger projections` has no command 'explode'"),
        (6, "`jobledger migrate` has no option --partitions"),
    ]
    found = [(f.line, f.mention, f.problem) for f in route_findings(page, routes, "page.md")]
    assert found == [
        (8, "DELETE /api/v1/jobs/{id}", found[0][2]),
        (8, "POST /api/v1/nothing", "no route /api/v1/nothing"),
    ]
    assert "not DELETE" in found[0][2]


def test_the_walk_reaches_every_command_of_the_cli() -> None:
    """Every command path the CLI lists (its lazy groups loaded) is accepted by the walk,
    with each of its options: the check knows the whole CLI, not a hand-kept list."""
    unknown = []
    for path, command in _commands(cli, []):
        context = click.Context(command)
        for param in command.get_params(context):
            if isinstance(param, click.Option):
                words = [*path, param.opts[0]]
                unknown += unknown_names(words, cli)
    assert unknown == []


def _commands(command: click.Command, path: list[str]) -> list[tuple[list[str], click.Command]]:
    found = [(path, command)]
    if isinstance(command, click.Group):
        context = click.Context(command)
        for name in command.list_commands(context):
            sub = command.get_command(context, name)
            assert sub is not None, name
            found += _commands(sub, [*path, name])
    return found
