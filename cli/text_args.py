"""Command-line text is UTF-8, or a usage error: the one check every command's strings pass.

On POSIX, Python decodes ``argv`` and the environment with ``surrogateescape``: the byte
``0xff`` in ``jobledger jobs --type $'\\xff'`` arrives as the lone surrogate ``'\\udcff'``,
which no UTF-8 encoder (a database driver, msgspec) accepts. Left alone it reached ~15
commands' queries and writes and ended in a ``UnicodeEncodeError`` traceback. Every plain
string parameter (click's ``STRING``, the type of any option or argument declared without
one) gets :data:`TEXT` instead, when :func:`require_utf8` walks a command, which the
``jobledger`` group does for each command it hands out: a command added later is covered
without remembering to. Paths (``click.Path``) keep their bytes: a file name need not be
UTF-8, and ``open()`` takes it back as it came.

Imports only click: ``jobledger --help`` and the error paths stay cheap.
"""

from __future__ import annotations

from typing import Any

import click


class Text(click.types.StringParamType):
    """A string that encodes as UTF-8 (no lone surrogate from undecodable bytes)."""

    name = "text"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        text = super().convert(value, param, ctx)
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            raw = text.encode("utf-8", errors="surrogateescape")
            self.fail(f"{_shown(raw)} is not UTF-8 text", param, ctx)
        return text


TEXT = Text()


def _shown(raw: bytes) -> str:
    """Bytes as a quoted, escaped, one-line Python bytes literal, cut to 60 bytes."""
    cut = raw[:60]
    return repr(cut) + ("…" if len(raw) > len(cut) else "")


def require_utf8(command: click.Command) -> click.Command:
    """Give every plain-string parameter of ``command`` and of its subcommands the
    :data:`TEXT` type (in place; repeating it changes nothing); returns ``command``."""
    for param in command.params:
        if type(param.type) is click.types.StringParamType:
            param.type = TEXT
    if isinstance(command, click.Group):
        for child in command.commands.values():
            require_utf8(child)
    return command
