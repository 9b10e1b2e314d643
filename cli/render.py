"""Output: JSON for machines (stdout only, always valid) and compact aligned text for people.

Text output never prints a stored value raw: every cell, field and one-line JSON passes
through :func:`printable`, so a job type, org, queue, stage, worker id, failure code or
message holding a terminal escape or a CR/LF (a forged row, or history written before the
ledger refused them) shows as ``\x1b`` or ``\r\n`` instead of repainting the terminal or
faking a line. JSON output needs no such care: its encoder escapes control characters.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import datetime
from typing import Any

import click
import msgspec

json_option = click.option(
    "--json", "as_json", is_flag=True, help="Print JSON on stdout instead of text."
)

MISSING = "-"
"""How text output shows an unset value."""

PAYLOAD_PREVIEW = 200
"""Characters of a payload (and other JSON values) a text line shows; ``--json`` prints all."""


_UNPRINTABLE = re.compile("[\x00-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")
"""Control characters (C0, DEL, C1) and the bidirectional overrides that reorder a line."""
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape(match: re.Match[str]) -> str:
    char = match.group(0)
    named = _NAMED.get(char)
    if named is not None:
        return named
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: str) -> str:
    """``text`` with every control character and bidi override spelled as an escape
    (``\\n``, ``\\x1b``, ``\\u202e``): one line, painted as written. Used by every text
    renderer on every value it shows."""
    return _UNPRINTABLE.sub(_escape, text)


def echo_line(text: str, *, err: bool = False) -> None:
    """Print one line for people, :func:`printable`: a confirmation (``enabled T``, ``paused
    queue Q``, ``added schedule S``) names what the user typed or the ledger stored, and a
    name may hold a bidi override (``d\u202eevil``), which a terminal would otherwise obey."""
    click.echo(printable(text), err=err)


def echo_json(value: Any) -> None:
    """Print ``value`` (already builtins: :mod:`ledger.api.shaping`) as indented JSON on
    stdout."""
    click.echo(msgspec.json.format(msgspec.json.encode(value), indent=2).decode())


def compact_json(value: Any, limit: int | None = None) -> str:
    """One-line JSON of ``value``, cut at ``limit`` characters (text output only)."""
    from ledger.api.shaping import plain  # loads the ledger's API: not for --help or errors

    text = printable(msgspec.json.encode(plain(value)).decode())
    if limit is not None and len(text) > limit:
        return text[: limit - 1] + "…"
    return text


def when(moment: datetime | None) -> str:
    """A time for people: UTC, to the millisecond, ``Z``-suffixed."""
    from ledger.api.shaping import iso_millis  # loads the ledger's API: not for --help or errors

    return MISSING if moment is None else iso_millis(moment)


def scalar(value: bool | int | float | str | None) -> str:
    """A single value for people: ``yes``/``no``, a float without trailing zeros, ``-`` for
    unset."""
    if value is None:
        return MISSING
    if isinstance(value, bool):
        return "yes" if value else "no"
    return f"{value:g}" if isinstance(value, float) else printable(str(value))


def seconds(value: float | None) -> str:
    if value is None:
        return MISSING
    return f"{value:g}s"


def table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """Left-aligned columns two spaces apart, headers first; no trailing spaces. Cells
    are shown :func:`printable`."""
    rows = [[printable(cell) for cell in row] for row in rows]
    widths = [len(header) for header in headers]
    for row in rows:
        widths = [max(width, len(cell)) for width, cell in zip(widths, row, strict=True)]
    lines = [headers, *rows]
    return "\n".join(
        "  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip()
        for line in lines
    )


def fields(pairs: Sequence[tuple[str, str]]) -> str:
    """``label  value`` lines with the values aligned, each value :func:`printable`."""
    width = max((len(label) for label, _ in pairs), default=0)
    return "\n".join(f"{label.ljust(width)}  {printable(value)}" for label, value in pairs)


def first_line(text: str) -> str:
    """The first non-blank line of ``text``, stripped ("" if none). Driver messages append
    "LINE 1: …" and a caret line; the first line is the diagnosis."""
    return next((line.strip() for line in text.splitlines() if line.strip()), "")
