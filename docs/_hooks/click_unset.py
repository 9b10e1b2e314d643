"""A mkdocs hook: an option without a default shows as mkdocs-click means it to.

Since click 8.3 an option with no default holds the sentinel ``UNSET``, not ``None``, and
mkdocs-click 0.9 prints it (``Sentinel.UNSET`` in the CLI reference's Default column, where
it means ``None``, *required* or a flag's ``False``). The fix proposed upstream
(mkdocs/mkdocs-click#95) reads the default through click's ``to_info_dict()``, which gives
``None`` (a flag: ``False``) for the sentinel on every click version; until it is released
this hook does the same around mkdocs-click's table row (its one function that reads the
default). Drop it then: tests/docs/test_site.py checks the
page either way, and a rename upstream fails the build here rather than passing silently.
"""

from __future__ import annotations

import copy
from typing import Any

import click
from mkdocs_click import _docs


def _row_with_plain_default(option: click.Option) -> str:
    shown = option.to_info_dict()["default"]  # the sentinel read as None, or a flag's False
    if shown is not option.default:
        option = copy.copy(option)
        option.default = shown
    return _TABLE_ROW(option)


_TABLE_ROW = _docs._format_table_option_row


def on_config(config: Any) -> Any:
    _docs._format_table_option_row = _row_with_plain_default
    return config
