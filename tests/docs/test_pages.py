"""Every example of the documentation runs and prints what the page shows.

Each page's examples run in page order in one session (``doc_session``): Python blocks and
hidden setups in one namespace, console sessions through the CLI against real ledgers in a
temporary directory, outputs compared after the volatile tokens listed in ``doc_output``.
A failure names the page and line of each example that went wrong, with a diff.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from doc_blocks import Kind, examples_of
from doc_session import DocSession

ROOT = Path(__file__).resolve().parents[2]
# The pages whose examples run, and the fewest examples of each kind each must yield: a
# markup or parser change that silently found nothing would fail here rather than pass.
PAGES: dict[str, dict[Kind, int]] = {
    "README.md": {Kind.PYTHON: 1},
    "docs/tutorial.md": {Kind.PYTHON: 4, Kind.CONSOLE: 7},
    "docs/shell-completion.md": {Kind.CONSOLE: 2},
    "docs/events.md": {Kind.PYTHON: 3},
    "docs/cli.md": {Kind.CONSOLE: 45, Kind.PYTHON: 20},
    "docs/workflows.md": {Kind.PYTHON: 4, Kind.CONSOLE: 9},
    "docs/schedules.md": {Kind.PYTHON: 3, Kind.CONSOLE: 4},
    "docs/jobs.md": {Kind.PYTHON: 7},
    "docs/transactions.md": {Kind.PYTHON: 5},
    "docs/integrity.md": {Kind.CONSOLE: 4, Kind.PYTHON: 3},
}
# Pages whose examples need a PostgreSQL database (``pg_url`` in their namespace).
ON_POSTGRES = {"docs/cli.md", "docs/transactions.md"}


def _page_params() -> list[object]:
    return [
        pytest.param(page, id=page, marks=[pytest.mark.postgres] if page in ON_POSTGRES else [])
        for page in PAGES
    ]


@pytest.mark.parametrize("page", _page_params())
def test_every_example_of_the_page_prints_what_the_page_shows(
    page: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """Each example of the page runs, exits and prints as documented, in page order."""
    session = DocSession(tmp_path)
    if page in ON_POSTGRES:
        session.namespace["pg_url"] = request.getfixturevalue("pg_url")
        session.namespace["empty_pg_url"] = request.getfixturevalue("empty_pg_url")
    failures = [
        outcome.failure
        for outcome in (session.run(example) for example in examples_of(ROOT / page))
        if outcome.failure is not None
    ]
    assert not failures, f"{len(failures)} example(s) of {page} differ:\n\n" + "\n\n".join(failures)


@pytest.mark.parametrize("page", list(PAGES))
def test_the_runner_finds_a_plausible_number_of_examples(page: str) -> None:
    """Each page yields at least its known number of runnable examples of each kind."""
    examples = examples_of(ROOT / page)
    counts = {kind: sum(example.kind is kind for example in examples) for kind in Kind}
    for kind, fewest in PAGES[page].items():
        assert counts[kind] >= fewest, (page, kind, counts)


@pytest.mark.parametrize("page", list(PAGES))
def test_skipped_examples_are_few_and_say_why(page: str) -> None:
    """At most one example in ten is marked no-run, and each names its reason."""
    examples = examples_of(ROOT / page)
    skipped = [example for example in examples if example.kind is Kind.SKIPPED]
    assert all(example.why_skipped.strip() for example in skipped)
    assert len(skipped) * 10 <= len(examples), [example.where for example in skipped]
