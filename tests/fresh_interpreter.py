"""What a fresh interpreter has imported after running a few lines: the probe of the tests
that pin a start-up's imports (a module imported once stays imported, so only a new process
can tell)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterable
from typing import NamedTuple


class Probe(NamedTuple):
    loaded: list[str]
    """Those of the modules asked about that were imported."""
    stdout: str
    """What the lines printed."""


def probe(code: str, modules: Iterable[str]) -> Probe:
    """Run ``code`` in a new interpreter of this venv, then list which of ``modules`` it
    imported (written to stderr, so the code's own stdout stays as it is)."""
    asked = tuple(modules)
    script = (
        f"{code}\n"
        "import sys as _sys\n"
        f"print(','.join(m for m in {asked!r} if m in _sys.modules), file=_sys.stderr)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    )
    listed = result.stderr.strip().splitlines()[-1] if result.stderr.strip() else ""
    return Probe([name for name in listed.split(",") if name], result.stdout)
