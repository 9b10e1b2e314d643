"""A griffe extension: read the Sphinx roles of our docstrings as Markdown.

The docstrings are written for reading in the source, with Sphinx roles (``:class:`~a.B```,
``:meth:`x```) that Markdown would print literally. Rewriting hundreds of docstrings across
modules that other work edits would buy nothing the reader of the source sees, so the site
reads them here instead: a role becomes a cross-reference when its target is a name the API
reference documents (so the link cannot dangle under ``--strict``), else inline code. ``~``
shows the last component only, as in Sphinx.
"""

from __future__ import annotations

import re
from typing import Any

import griffe

ROLE = re.compile(
    r":(?:py:)?(?:class|func|meth|mod|data|attr|exc|obj|const|type):`(?P<tilde>~?)(?P<target>[^`]+)`"
)


def documented_targets() -> dict[str, str]:
    """The API reference's objects: each public ``ledger.Name`` and its defining path, both
    mapped to the defining path (the identifier mkdocstrings gives the rendered object)."""
    import ledger

    targets: dict[str, str] = {}
    for name, module in ledger._EXPORTS.items():
        targets[f"{module}.{name}"] = f"{module}.{name}"
        targets[f"ledger.{name}"] = f"{module}.{name}"
    return targets


class SphinxRoles(griffe.Extension):
    """Rewrite each object's docstring's roles once, when griffe has loaded it."""

    def __init__(self) -> None:
        super().__init__()
        self.targets = documented_targets()

    def on_object(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = self.rewrite(obj.docstring.value)

    def rewrite(self, text: str) -> str:
        """``text`` with each role as Markdown."""
        return ROLE.sub(self._markdown, text)

    def _markdown(self, match: re.Match[str]) -> str:
        target = match["target"].removesuffix("()")
        shown = target.rsplit(".", 1)[-1] if match["tilde"] else target
        code = f"`{shown}`"
        resolved = self.targets.get(target)
        return f"[{code}][{resolved}]" if resolved else code
