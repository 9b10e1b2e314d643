"""The relative links of a Markdown page, and whether each names a file (and heading) that
exists. For the pages outside the docs site (README.md, bench/*.md), which ``mkdocs build
--strict`` does not read; the site's own pages are checked by that build.

Anchors are GitHub's (the pages are read there): a heading's text lowercased, punctuation but
``-`` and ``_`` dropped, each space a ``-``, a repeat suffixed ``-1``, ``-2``… The site uses
the same slugs (``mkdocs.yml``'s ``toc.slugify``), so one link works in both places.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from pymdownx.slugs import slugify

LINK = re.compile(r"(?<!!)\[[^\]]*\]\((?P<target>[^)\s]+)(?:\s+\"[^\"]*\")?\)")
FENCED = re.compile(r"^([ \t]*)```.*?^\1```[ \t]*$", flags=re.M | re.S)
HEADING = re.compile(r"^#{1,6}\s+(?P<text>.+?)\s*#*\s*$", flags=re.M)
EXTERNAL = re.compile(r"^[a-z][a-z0-9+.-]*:", flags=re.I)  # http:, https:, mailto:
_slug = slugify(case="lower")


@dataclass(frozen=True)
class BrokenLink:
    page: Path
    line: int
    target: str
    why: str

    def __str__(self) -> str:
        return f"{self.page.name}:{self.line}: ({self.target}) {self.why}"


def anchors_of(page: Path) -> set[str]:
    """The anchors GitHub gives the headings of ``page`` (fenced code left out)."""
    text = FENCED.sub("", page.read_text(encoding="utf-8"))
    seen: Counter[str] = Counter()
    anchors: set[str] = set()
    for match in HEADING.finditer(text):
        base = _slug(re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", match["text"]), "-")
        anchors.add(base if seen[base] == 0 else f"{base}-{seen[base]}")
        seen[base] += 1
    return anchors


def broken_links(page: Path) -> list[BrokenLink]:
    """The relative links of ``page`` whose file, or heading in a Markdown file, is missing."""
    text = page.read_text(encoding="utf-8")
    prose = FENCED.sub(lambda block: "\n" * block[0].count("\n"), text)
    broken: list[BrokenLink] = []
    for match in LINK.finditer(prose):
        target = match["target"]
        if EXTERNAL.match(target):
            continue
        line = prose.count("\n", 0, match.start()) + 1
        path_part, _, anchor = target.partition("#")
        linked = (page.parent / path_part).resolve() if path_part else page
        if not linked.exists():
            broken.append(BrokenLink(page, line, target, "no such file"))
        elif anchor and linked.suffix == ".md" and anchor not in anchors_of(linked):
            broken.append(BrokenLink(page, line, target, f"no heading #{anchor}"))
    return broken
