"""Progress on stderr for long work (rebuild, verify, migrate)."""

from __future__ import annotations

import sys
from typing import Any

import click


class ProgressBars:
    """``progress(phase, done, total)`` as one click progress bar per phase, on stderr."""

    def __init__(self) -> None:
        self._phase: str | None = None
        self._bar: Any = None  # click's ProgressBar, entered by hand across calls
        self._done = 0

    def __call__(self, phase: str, done: int, total: int) -> None:
        if phase != self._phase:
            self.close()
            self._phase, self._done = phase, 0
            bar = click.progressbar(length=max(total, 1), label=phase.ljust(20), file=sys.stderr)
            self._bar = bar.__enter__()
        self._bar.update(max(0, done - self._done))
        self._done = done

    def close(self) -> None:
        if self._bar is not None:
            self._bar.__exit__(None, None, None)
            self._bar = None
            self._phase = None
