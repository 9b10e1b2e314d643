"""Find the runnable examples of a Markdown page, with the line each starts on.

What counts as an example, in page order:

- a fenced block tagged ``python``: code, run in the page's namespace;
- a fenced block (any tag) whose first line starts with ``$ ``: a console session, a command
  per ``$ `` line followed by the output it prints (ending in ``[exit N]`` when the exit code
  is not 0);
- a hidden setup, ``<!-- doc: setup`` … ``-->``: Python code the page needs but need not
  show (job types defined, jobs enqueued, a fake clock), run like a ``python`` block.

``<!-- doc: no-run (why) -->`` right before a fenced block keeps that block from running; the
reason is required, so every exception says why on the page itself. Every other fenced block
(a synopsis, a list of messages, a diagram, the README's install commands) is prose.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum
from pathlib import Path

FENCE = re.compile(r"^(\s*)```(\S*)\s*$")
NO_RUN = re.compile(r"^<!-- doc: no-run \((?P<why>[^)]+)\) -->$")
SETUP_OPEN = "<!-- doc: setup"
COMMENT_CLOSE = "-->"
DIRECTIVE = "<!-- doc:"


class Kind(Enum):
    PYTHON = "python"
    CONSOLE = "console"
    SKIPPED = "skipped"


@dataclass(frozen=True)
class Example:
    """One runnable (or explicitly skipped) example: where it is, what it holds."""

    doc: Path
    line: int  # 1-based line of the opening fence or setup comment
    kind: Kind
    text: str
    hidden: bool = False
    why_skipped: str = ""

    @property
    def where(self) -> str:
        return f"{self.doc.name}:{self.line}"


class DocFormatError(ValueError):
    """A page's example markup is malformed (an unclosed fence, a stray directive)."""


def examples_of(doc: Path) -> list[Example]:
    """The examples of ``doc`` in page order (skipped ones included, marked so)."""
    lines = doc.read_text(encoding="utf-8").splitlines()
    found: list[Example] = []
    pending_no_run: str | None = None
    index = 0
    while index < len(lines):
        line = lines[index]
        stripped = line.strip()
        if stripped.startswith(SETUP_OPEN):
            end = _closing(lines, index, COMMENT_CLOSE, doc)
            code = "\n".join(lines[index + 1 : end]) + "\n"
            found.append(Example(doc, index + 1, Kind.PYTHON, code, hidden=True))
            index = end + 1
            continue
        if stripped.startswith(DIRECTIVE):
            match = NO_RUN.match(stripped)
            if match is None:
                raise DocFormatError(f"{doc.name}:{index + 1}: unknown directive {stripped!r}")
            pending_no_run = match["why"]
            index += 1
            continue
        fence = FENCE.match(line)
        if fence is None:
            if stripped and pending_no_run is not None:
                raise DocFormatError(f"{doc.name}:{index + 1}: no-run must precede a fence")
            index += 1
            continue
        end = _closing(lines, index, fence[1] + "```", doc)
        indent = len(fence[1])
        body = "\n".join(text[indent:] for text in lines[index + 1 : end]) + "\n"
        kind = _kind_of(fence[2], body)
        if pending_no_run is not None:
            if kind is None:
                raise DocFormatError(f"{doc.name}:{index + 1}: no-run on a block that never runs")
            found.append(Example(doc, index + 1, Kind.SKIPPED, body, why_skipped=pending_no_run))
        elif kind is not None:
            found.append(Example(doc, index + 1, kind, body))
        pending_no_run = None
        index = end + 1
    return found


def _kind_of(tag: str, body: str) -> Kind | None:
    if tag == "python":
        return Kind.PYTHON
    if body.lstrip("\n").startswith("$ "):
        return Kind.CONSOLE
    return None


def _closing(lines: list[str], start: int, closer: str, doc: Path) -> int:
    for index in range(start + 1, len(lines)):
        if lines[index].rstrip() == closer:
            return index
    raise DocFormatError(f"{doc.name}:{start + 1}: never closed (expected {closer!r})")
