"""Output: JSON for machines (stdout only, always valid) and compact aligned text for people."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

import click
import msgspec

from ledger.api.shaping import iso_millis, plain

json_option = click.option(
    "--json", "as_json", is_flag=True, help="Print JSON on stdout instead of text."
)

MISSING = "-"
"""How text output shows an unset value."""

PAYLOAD_PREVIEW = 200
"""Characters of a payload (and other JSON values) a text line shows; ``--json`` prints all."""


def echo_json(value: Any) -> None:
    """Print ``value`` (already builtins: :mod:`ledger.api.shaping`) as indented JSON on
    stdout."""
    click.echo(msgspec.json.format(msgspec.json.encode(value), indent=2).decode())


def compact_json(value: Any, limit: int | None = None) -> str:
    """One-line JSON of ``value``, cut at ``limit`` characters (text output only)."""
    text = msgspec.json.encode(plain(value)).decode()
    if limit is not None and len(text) > limit:
        return text[: limit - 1] + "…"
    return text


def when(moment: datetime | None) -> str:
    """A time for people: UTC, to the millisecond, ``Z``-suffixed."""
    return MISSING if moment is None else iso_millis(moment)


def scalar(value: bool | int | float | str | None) -> str:
    """A single value for people: ``yes``/``no``, a float without trailing zeros, ``-`` for
    unset."""
    if value is None:
        return MISSING
    if isinstance(value, bool):
        return "yes" if value else "no"
    return f"{value:g}" if isinstance(value, float) else str(value)


def seconds(value: float | None) -> str:
    if value is None:
        return MISSING
    return f"{value:g}s"


def table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """Left-aligned columns two spaces apart, headers first; no trailing spaces."""
    widths = [len(header) for header in headers]
    for row in rows:
        widths = [max(width, len(cell)) for width, cell in zip(widths, row, strict=True)]
    lines = [headers, *rows]
    return "\n".join(
        "  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip()
        for line in lines
    )


def fields(pairs: Sequence[tuple[str, str]]) -> str:
    """``label  value`` lines with the values aligned."""
    width = max((len(label) for label, _ in pairs), default=0)
    return "\n".join(f"{label.ljust(width)}  {value}" for label, value in pairs)


def first_line(text: str) -> str:
    """The first non-blank line of ``text``, stripped ("" if none). Driver messages append
    "LINE 1: …" and a caret line; the first line is the diagnosis."""
    return next((line.strip() for line in text.splitlines() if line.strip()), "")
