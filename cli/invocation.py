"""How the user ran ``jobledger``, so a command it suggests can be run as printed.

The README installs into ``.venv`` and runs ``.venv/bin/jobledger demo``: ``jobledger`` is then
not on ``PATH``, and a suggested ``jobledger show …`` would fail. ``sys.argv[0]`` says how it
was run: the console script found on ``PATH`` (a shell passes its full path), a path typed by
hand (``.venv/bin/jobledger``), or ``python -m jobledger_cli.main``.
"""

from __future__ import annotations

import os
import shlex
import shutil
import sys
from pathlib import Path

PROGRAM = "jobledger"


def program(argv0: str | None = None, executable: str | None = None) -> str:
    """The words that run ``jobledger`` again the way it was run now, quoted for a shell:
    ``jobledger`` when that is what ``PATH`` finds, else the script's path as typed, or
    ``<python> -m jobledger_cli.main``. Anything else (a test runner's argv) is ``jobledger``."""
    argv0 = sys.argv[0] if argv0 is None else argv0
    path = Path(argv0)
    if path.name == PROGRAM:
        on_path = shutil.which(PROGRAM)
        if on_path is not None and _same_file(on_path, argv0):
            return PROGRAM
        return shlex.quote(argv0)
    if path.name == "main.py" and path.parent.name in {"cli", "jobledger_cli"}:
        return f"{shlex.quote(executable or sys.executable)} -m jobledger_cli.main"
    return PROGRAM


def _same_file(a: str, b: str) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False
