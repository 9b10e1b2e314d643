"""A mkdocs hook: drop the nav entries of pages that other work is still writing.

The nav names every page the site will have, so the branches that add ``jobs.md``,
``transactions.md`` and ``testing.md`` need not touch ``mkdocs.yml``. Until such a page
exists its entry is dropped here (logged), instead of relaxing ``validation.nav.not_found``
for every entry: a misspelt nav entry for any other page still fails the strict build.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from mkdocs.config.defaults import MkDocsConfig

PLANNED = frozenset({"jobs.md", "transactions.md", "testing.md"})

log = logging.getLogger("mkdocs.hooks.planned_pages")


def on_config(config: MkDocsConfig) -> MkDocsConfig:
    docs = Path(config.docs_dir)
    config.nav = _without_missing(config.nav or [], docs)
    return config


def _without_missing(entries: list[Any], docs: Path) -> list[Any]:
    kept: list[Any] = []
    for entry in entries:
        if isinstance(entry, dict):
            [(title, target)] = entry.items()
            if isinstance(target, list):
                kept.append({title: _without_missing(target, docs)})
                continue
            if target in PLANNED and not (docs / target).exists():
                log.info("nav: %s (%s) is planned and not written yet; left out", target, title)
                continue
        kept.append(entry)
    return kept
