"""Progress on stderr for long work (rebuild, verify, migrate, time travel, export, import,
replay --all, demo, bench).

Progress is for people, so it goes to stderr, and only when stderr is a terminal: stdout stays
the result (or JSON), and a pipe, a log or a CI run gets no progress at all (the result says
what was done).
"""

from __future__ import annotations

import io
import sys
from typing import Any, TextIO

import click


def bars_drawn() -> bool:
    """Whether progress is shown at all: stderr is a terminal. Every progress display asks
    this (not ``isatty`` itself), so one patch shows them all (the docs' sessions do)."""
    return sys.stderr.isatty()


def progress_file() -> TextIO:
    """Where a click progress bar draws: stderr on a terminal, else nowhere."""
    return sys.stderr if bars_drawn() else io.StringIO()


class ProgressBars:
    """``progress(phase, done, total)`` as one click progress bar per phase on stderr when it
    is a terminal; otherwise nothing (the command's result says what was done)."""

    def __init__(self) -> None:
        self._live = bars_drawn()
        self._phase: str | None = None
        self._bar: Any = None  # click's ProgressBar, entered by hand across calls
        self._done = 0
        self._total = 0

    def __call__(self, phase: str, done: int, total: int) -> None:
        if phase != self._phase:
            self.close()
            self._phase, self._done = phase, 0
            if self._live:
                bar = click.progressbar(
                    length=max(total, 1), label=phase.ljust(20), file=sys.stderr
                )
                self._bar = bar.__enter__()
        if self._bar is not None:
            self._bar.update(max(0, done - self._done))
        self._done, self._total = done, total

    def close(self) -> None:
        if self._bar is not None:
            self._bar.__exit__(None, None, None)
            self._bar = None
        self._phase = None


class StderrCounter:
    """``progress(phase, done, total)`` as ``phase: done[/total]`` rewritten in place on
    stderr, only when stderr is a terminal (a log file or a test would get one line per batch
    otherwise)."""

    def __init__(self) -> None:
        self._live = sys.stderr.isatty()  # not bars_drawn(): the docs' pages show no counter
        self._shown = False

    def __call__(self, phase: str, done: int, total: int) -> None:
        if self._live:
            of = f"/{total:,}" if total else ""
            click.echo(f"\r{phase}: {done:,}{of}  ", nl=False, err=True)
            self._shown = True

    def close(self) -> None:
        if self._shown:
            click.echo("", err=True)
            self._shown = False


class FoldingProgress:
    """``progress(position, head)`` of a fold over the whole history: a line on stderr about
    once per tenth of the history, only when stderr is a terminal."""

    def __init__(self) -> None:
        self._live = sys.stderr.isatty()  # not bars_drawn(): the docs' pages show no fold
        self._shown = -1

    def __call__(self, position: int, head: int) -> None:
        if not self._live:
            return
        tenth = position * 10 // max(head, 1)
        if tenth != self._shown:
            self._shown = tenth
            click.echo(f"folding history: position {position} of {head}", err=True)
