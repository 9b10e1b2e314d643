"""docs/testing.md's examples are test modules of a user's suite: each runs through the
plugin (pytester) and all its tests pass, on each backend; its console example prints what
the recipe prints.

Not in test_pages.py's PAGES: there a Python block runs as code in one namespace, which for a
module of test functions would only define them.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest
from doc_blocks import Kind, examples_of

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "testing.md"
FEWEST_MODULES = 5


def _modules() -> list[tuple[str, str]]:
    return [
        (f"test_testing_md_line_{example.line}", example.text)
        for example in examples_of(PAGE)
        if example.kind is Kind.PYTHON and not example.hidden
    ]


def _test_functions(source: str) -> int:
    return sum(
        isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name.startswith("test_")
        for node in ast.parse(source).body
    )


def test_the_page_has_its_examples_and_none_is_skipped() -> None:
    """The parser finds the page's test modules (a markup slip would find none) and no
    example is marked no-run."""
    assert len(_modules()) >= FEWEST_MODULES
    assert not [e for e in examples_of(PAGE) if e.kind is Kind.SKIPPED]


@pytest.mark.parametrize(
    "backend", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
def test_every_example_module_passes_through_the_plugin(
    pytester: pytest.Pytester, jobledger_postgres_server: str, backend: str
) -> None:
    """Each example module, run by pytest with the plugin (its ledgers on ``backend``
    unless the module parametrizes the backend itself), passes every test it defines."""
    modules = _modules()
    pytester.makeconftest(
        f"""
import pytest

@pytest.fixture
def jobledger_backend():
    return {backend!r}
"""
    )
    pytester.makepyfile(**dict(modules))
    result = pytester.runpytest(
        "-p",
        "no:cacheprovider",
        "-o",
        "asyncio_default_fixture_loop_scope=function",
        "--jobledger-postgres",
        jobledger_postgres_server,
    )
    outcomes = result.parseoutcomes()
    assert outcomes.get("passed", 0) >= sum(_test_functions(text) for _, text in modules)
    assert set(outcomes) <= {"passed", "warnings"}, result.stdout.str()


def test_the_console_example_prints_what_the_recipe_prints() -> None:
    """The page's ``python examples/plain_script.py`` session shows the script's output."""
    [console] = [e for e in examples_of(PAGE) if e.kind is Kind.CONSOLE]
    command, _, shown = console.text.partition("\n")
    assert command == "$ python examples/plain_script.py"
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "plain_script.py")],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert (done.returncode, done.stdout) == (0, shown), done.stderr
