"""The pages outside the docs site link only to files and headings that exist."""

from __future__ import annotations

from pathlib import Path

import pytest
from doc_links import BrokenLink, anchors_of, broken_links

ROOT = Path(__file__).resolve().parents[2]
# The Markdown files that mkdocs does not build (it checks the links of docs/ itself).
OUTSIDE_THE_SITE = sorted([*ROOT.glob("*.md"), *ROOT.glob("bench/*.md")])


@pytest.mark.parametrize("page", OUTSIDE_THE_SITE, ids=lambda page: str(page.relative_to(ROOT)))
def test_every_relative_link_names_a_file_and_heading_that_exist(page: Path) -> None:
    """Each relative link of the page resolves to a file, and its anchor to a heading."""
    assert broken_links(page) == []


def test_a_missing_file_or_heading_is_reported_with_its_line(tmp_path: Path) -> None:
    """A link to a file that is not there, or to a heading a page lacks, is broken; a link
    to an existing heading, an external URL or inside a code block is not."""
    (tmp_path / "other.md").write_text("# Other\n\n## Run `jobledger init` — once\n")
    page = tmp_path / "page.md"
    page.write_text(
        "# Page\n"
        "[ok](other.md#run-jobledger-init--once) [web](https://example.com/x.md)\n"
        "```\n[in code](nowhere.md)\n```\n"
        "[gone](nowhere.md) [no heading](other.md#setup) [here](#page)\n",
        encoding="utf-8",
    )
    assert broken_links(page) == [
        BrokenLink(page, 6, "nowhere.md", "no such file"),
        BrokenLink(page, 6, "other.md#setup", "no heading #setup"),
    ]


def test_repeated_headings_get_numbered_anchors(tmp_path: Path) -> None:
    """The second heading of the same text is ``-1``, as on GitHub."""
    page = tmp_path / "page.md"
    page.write_text("# Options\n## Options\n### `--db URL`\n", encoding="utf-8")
    assert anchors_of(page) == {"options", "options-1", "--db-url"}
