"""Registered source listers: what a worker polls when a ``jobledger.source_poll`` job names
a source (:mod:`ledger.runtime.source_poller` runs them).

A lister is a plain or ``async`` function of no arguments returning a complete listing
``[(uri, revision | None)]`` of its source (see :mod:`ledger.core.source_diff` for what a
revision must be for edits to be seen); :func:`directory_lister` is a ready-made one.
"""

from __future__ import annotations

import asyncio
import inspect
import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ledger.core.source_diff import Listing
from ledger.core.source_polls.decide import SourceConfig

SourceLister = Callable[[], Listing] | Callable[[], Awaitable[Listing]]
"""A source's lister: ``def`` or ``async def``, no arguments, a complete listing."""


@dataclass(frozen=True)
class SourceSpec:
    """A registered source: its name (the sync subjects' ``source_id``), lister and config."""

    name: str
    lister: SourceLister
    config: SourceConfig

    def list(self) -> Listing:
        """Run the lister to completion on the calling thread (an ``async`` one in an event
        loop of its own: the poll runs on a handler thread, or in the CLI, never on the
        pool's loop)."""
        found: Any = self.lister()
        if inspect.isawaitable(found):
            found = asyncio.run(_awaited(found))
        return list(found)


async def _awaited(awaitable: Awaitable[Listing]) -> Listing:
    return await awaitable


def directory_lister(root: str | os.PathLike[str], pattern: str = "**/*") -> Callable[[], Listing]:
    """A lister of the regular files under ``root`` matching ``pattern`` (a
    :meth:`pathlib.Path.glob` pattern): each file's ``file://`` URI, with
    ``"<mtime_ns>-<size>"`` as its revision, so an edit that keeps the size but touches the
    file is seen too. A missing ``root`` raises (:class:`FileNotFoundError`): a source that
    vanished is a failed poll, not an empty listing that would delete every URI."""
    base = Path(root)

    def list_directory() -> Listing:
        if not base.is_dir():
            raise FileNotFoundError(f"source directory {str(base)!r} does not exist")
        found: list[tuple[str, str | None]] = []
        for path in sorted(base.glob(pattern)):
            if path.is_file():
                stat = path.stat()
                found.append((path.resolve().as_uri(), f"{stat.st_mtime_ns}-{stat.st_size}"))
        return found

    return list_directory
