"""Compare a documented command output with what the command printed.

The page shows one real run; a new run differs in what is volatile by nature. Exactly these
tokens of the documented text are volatile, everything else must match literally (runs of
spaces count as one, so table columns may be wider or narrower; trailing spaces are ignored):

========  ===============================================  ===================================
kind      documented token                                 matches
========  ===============================================  ===================================
uuid      a UUID                                           a UUID, *bound* (below)
worker    ``name@host:pid``                                any ``name@host:pid``, bound
cursor    an audit cursor after ``--cursor``/``cursor:``   any cursor, bound
time      an ISO 8601 date-time (``T`` or space)           any ISO 8601 date-time
dir       the directories of an absolute path              any absolute directories
seconds   a decimal followed by ``s`` (``0.83s``)          any number of seconds
float     after ``delay_s=``/``"delay_s": ``/              any number
          ``"seconds": ``
line      a traceback's line number (``", line 48``)       any line number
digest    ``sha256:`` and 64 hex digits (an export's       any such digest
          trailer: a digest of volatile content)
========  ===============================================  ===================================

A *bound* token stands for one value for the whole page: the first time a documented UUID
(say) is met its printed counterpart is recorded, and from then on the documented UUID must
print as that same value, and no other documented UUID may. Commands are rewritten with the
bindings before they run, so ``jobledger show <the id enqueue printed>`` reads as on the page.

A line holding only ``…`` stands for any number of lines (the page cut the output there).
A progress bar line (``working  [####]  100/100``) is optional: a terminal shows it, the
tests' runs draw no bars.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field

ELISION = "…"
PROGRESS_BAR = re.compile(r"^\S.*\s\[#+\]\s")
BOUND_KINDS = frozenset({"uuid", "worker", "cursor"})
_NUMBER = r"\d+(?:\.\d+)?(?:e-?\d+)?"
# Order matters: the first alternative that matches at a position wins.
VOLATILE: dict[str, tuple[str, str]] = {
    # kind: (how the token looks on the page, what it matches in the output)
    "uuid": (
        r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}",
        r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}",
    ),
    "time": (
        r"\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:\d\d)?",
        r"\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:\d\d)?",
    ),
    "worker": (r"[\w.-]+@[\w.-]+:\d+", r"[\w.-]+@[\w.-]+:\d+"),
    "cursor": (
        r"(?<=--cursor )[A-Za-z0-9_-]{6,}|(?<=cursor: )[A-Za-z0-9_-]{6,}"
        r'|(?<="next_cursor": ")[A-Za-z0-9_-]{6,}',
        r"[A-Za-z0-9_-]+",
    ),
    "dir": (r"(?<![\w:/.])/(?:[\w.-]+/)+", r"/(?:[\w.-]+/)*"),
    "seconds": (r"\b\d+\.\d+(?=s\b)", _NUMBER),
    "line": (r'(?<=", line )\d+', r"\d+"),
    "float": (r'(?<=delay_s=)[\d.e-]+|(?<="delay_s": )[\d.e-]+|(?<="seconds": )[\d.e-]+', _NUMBER),
    "digest": (r"sha256:[0-9a-f]{64}", r"sha256:[0-9a-f]{64}"),
    # The hash chain's heads and key ids (docs/integrity.md): 16, 32 or 64 hex digits.
    "chain": (r"\b(?:[0-9a-f]{64}|[0-9a-f]{32}|[0-9a-f]{16})\b", r"[0-9a-f]{16,64}"),
}
_TOKEN = re.compile("|".join(f"(?P<{kind}>{page})" for kind, (page, _) in VOLATILE.items()))


@dataclass
class Bindings:
    """Documented value -> printed value of every bound token met so far on one page."""

    printed: dict[str, str] = field(default_factory=dict)

    def rewrite(self, command: str) -> str:
        """``command`` with every documented bound value replaced by its printed value."""
        if not self.printed:
            return command
        pattern = re.compile(
            "|".join(re.escape(doc) for doc in sorted(self.printed, key=len)[::-1])
        )
        return pattern.sub(lambda match: self.printed[match[0]], command)

    def bind(self, pairs: list[tuple[str, str]]) -> str | None:
        """Record ``(documented, printed)`` pairs; the first inconsistency as text, else None."""
        taken = {printed: doc for doc, printed in self.printed.items()}
        for doc, printed in pairs:
            if self.printed.get(doc, printed) != printed:
                return f"{doc} printed as {printed}, earlier as {self.printed[doc]}"
            if taken.get(printed, doc) != doc:
                return f"{doc} and {taken[printed]} both printed as {printed}"
            self.printed[doc] = printed
            taken[printed] = doc
        return None


@dataclass(frozen=True)
class LinePattern:
    regex: re.Pattern[str]
    bound: tuple[str, ...]  # the documented values of the bound groups, in group order


def _squash(line: str) -> str:
    return re.sub(r" {2,}", " ", line.rstrip())


def line_pattern(documented: str) -> LinePattern:
    """The regex a documented output line stands for (see the module's table)."""
    text = _squash(documented)
    parts: list[str] = []
    bound: list[str] = []
    last = 0
    for token in _TOKEN.finditer(text):
        kind = token.lastgroup
        assert kind is not None
        parts.append(re.escape(text[last : token.start()]))
        printed = VOLATILE[kind][1]
        if kind in BOUND_KINDS:
            parts.append(f"({printed})")
            bound.append(token[0])
        else:
            parts.append(f"(?:{printed})")
        last = token.end()
    parts.append(re.escape(text[last:]))
    return LinePattern(re.compile("".join(parts).replace(r"\ ", " ")), tuple(bound))


def _match(
    documented: list[str], printed: list[str], bindings: dict[str, str]
) -> dict[str, str] | None:
    """The bindings under which ``printed`` matches ``documented``, or None if it cannot."""
    if not documented:
        return bindings if not printed else None
    head, rest = documented[0], documented[1:]
    if head.strip() == ELISION:
        for skip in range(len(printed) + 1):
            result = _match(rest, printed[skip:], bindings)
            if result is not None:
                return result
        return None
    if PROGRESS_BAR.match(head):
        return _match(rest, printed, bindings)
    if not printed:
        return None
    pattern = line_pattern(head)
    found = pattern.regex.fullmatch(_squash(printed[0]))
    if found is None:
        return None
    trial = Bindings(dict(bindings))
    if trial.bind(list(zip(pattern.bound, found.groups(), strict=True))) is not None:
        return None
    return _match(rest, printed[1:], trial.printed)


def compare(documented: str, printed: str, bindings: Bindings) -> str | None:
    """None if ``printed`` is what the page documents (bindings recorded); else a diff."""
    doc_lines = documented.splitlines()
    out_lines = printed.splitlines()
    result = _match(doc_lines, out_lines, bindings.printed)
    if result is not None:
        bindings.printed = result
        return None
    diff = difflib.unified_diff(doc_lines, out_lines, "documented", "printed", lineterm="")
    return "\n".join(diff)
