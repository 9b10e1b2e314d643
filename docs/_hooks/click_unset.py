"""A mkdocs hook: show an option without a default as mkdocs-click means to, ``None``.

Since click 8.3 an option with no default holds the sentinel ``UNSET``, not ``None``, and
mkdocs-click 0.9 prints it (``Sentinel.UNSET`` in the CLI reference's Default column); the
fix is proposed upstream (mkdocs/mkdocs-click#95). Until it is released the rendered page is
mended here; drop this hook then (tests/docs/test_site.py checks the page either way).
"""

from __future__ import annotations

from typing import Any

UNSET_CELL = "<td><code>Sentinel.UNSET</code></td>"
NONE_CELL = "<td>None</td>"  # what mkdocs-click prints for a default of None


def on_page_content(html: str, **kwargs: Any) -> str:
    return html.replace(UNSET_CELL, NONE_CELL)
