"""The docs site (``mkdocs.yml``): it builds strictly, its generated references cover every
public name and every command, and its two hooks do what they say.

One strict build per session, into a temporary directory, as ``.ci/run`` builds it.
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import click
import pytest

import ledger
from jobledger_cli.main import cli

ROOT = Path(__file__).resolve().parents[2]
API_PAGE = ROOT / "docs" / "reference" / "api.md"
DIRECTIVE = re.compile(r"^::: (?P<path>[\w.]+)\s*$", flags=re.M)
# Entries beyond ``ledger``'s names: a base whose methods a user calls on an exported class
# (``Ledger.claim``, ``succeed``, ``fail``… are ``WorkerCommands``'), rendered once there.
EXTRA_ENTRIES = {"ledger.api.worker_commands.WorkerCommands"}


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The site, built as CI builds it (strict: any warning fails the build)."""
    out = tmp_path_factory.mktemp("site")
    built = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        check=False,
    )
    assert built.returncode == 0, built.stderr
    return out


def _hook(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, ROOT / "docs" / "_hooks" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _command_paths(command: click.Command, path: tuple[str, ...]) -> list[tuple[str, ...]]:
    if not isinstance(command, click.Group):
        return [path]
    context = click.Context(command, info_name=path[-1])
    found = [path]
    for name in command.list_commands(context):
        subcommand = command.get_command(context, name)
        assert subcommand is not None, name
        found += _command_paths(subcommand, (*path, name))
    return found


def test_the_cli_reference_has_a_section_for_every_command(site: Path) -> None:
    """Every command and subcommand (``jobledger workflow start``…) has its heading in the
    generated CLI reference, whose ids are the command's words joined by ``-``."""
    page = (site / "reference" / "cli" / "index.html").read_text(encoding="utf-8")
    ids = set(re.findall(r'<h[1-6] id="([^"]+)"', page))
    paths = _command_paths(cli, ("jobledger",))
    assert len(paths) > 40  # the walk reached the subcommands
    assert [" ".join(path) for path in paths if "-".join(path) not in ids] == []


def test_the_cli_reference_shows_defaults_not_click_internals(site: Path) -> None:
    """Each option's Default cell is its value (``--concurrency``: 10), a flag's ``False``,
    a required option's ``_required`` (mkdocs-click's word), ``None`` for no default: never
    click's ``Sentinel.UNSET`` (docs/_hooks/click_unset.py)."""
    page = (site / "reference" / "cli" / "index.html").read_text(encoding="utf-8")
    worker = page[page.index('id="jobledger-worker"') :]

    def default_of(option: str) -> str:
        row = re.search(rf"<td><code>{option}</code></td>(.*?)</tr>", worker, flags=re.S)
        assert row is not None, option
        return re.findall(r"<td>(.*?)</td>", row[1], flags=re.S)[-1]

    assert default_of("--concurrency") == "<code>10</code>"
    assert default_of("--burst") == "<code>False</code>"
    assert default_of("--app") == "_required"
    assert default_of("--types") == "None"
    assert "UNSET" not in page


def test_the_api_reference_documents_every_public_name_where_it_is_defined() -> None:
    """``docs/reference/api.md`` has one ``:::`` entry per name of ``ledger.__all__``, at the
    module ``ledger`` loads it from, and no others but the listed bases."""
    documented = DIRECTIVE.findall(API_PAGE.read_text(encoding="utf-8"))
    expected = [f"{ledger._EXPORTS[name]}.{name}" for name in ledger.__all__]
    assert sorted(documented) == sorted([*expected, *EXTRA_ENTRIES])


def test_every_public_name_is_rendered_on_the_api_page(site: Path) -> None:
    """Each entry rendered (an anchor with its path), its docstring's Sphinx roles read as
    links or code rather than printed."""
    page = (site / "reference" / "api" / "index.html").read_text(encoding="utf-8")
    missing = [
        f"{module}.{name}"
        for name, module in ledger._EXPORTS.items()
        if f'id="{module}.{name}"' not in page
    ]
    assert missing == []
    assert ":class:" not in page and ":meth:" not in page


def test_a_planned_page_that_is_missing_leaves_the_nav_and_nothing_else_does(
    tmp_path: Path,
) -> None:
    """The planned-pages hook drops a planned page's entry only while the file is missing; an
    unknown missing page stays (so the strict build still fails on it)."""
    planned_pages = _hook("planned_pages")
    (tmp_path / "testing.md").write_text("# Testing\n")
    nav = [
        {"Home": "index.md"},
        {"How-to": [{"Jobs": "jobs.md"}, {"Testing": "testing.md"}, {"Typo": "operatons.md"}]},
    ]
    assert planned_pages._without_missing(nav, tmp_path) == [
        {"Home": "index.md"},
        {"How-to": [{"Testing": "testing.md"}, {"Typo": "operatons.md"}]},
    ]


def test_sphinx_roles_become_links_to_documented_names_and_code_otherwise() -> None:
    """A role naming a documented object links to it (``~``: its last component shown); a role
    naming anything else is inline code, so no link can dangle."""
    roles = _hook("sphinx_roles").SphinxRoles()
    text = (
        ":class:`~ledger.api.reader.Reader`, :class:`ledger.Ledger`, "
        ":meth:`~ledger.store.unit_of_work.UnitOfWork.append`, :func:`drain()`"
    )
    assert roles.rewrite(text) == (
        "[`Reader`][ledger.api.reader.Reader], [`ledger.Ledger`][ledger.api.ledger.Ledger], "
        "`append`, `drain`"
    )
