"""Fixtures of the source-poll tests: a directory source and the registry that polls it."""

from __future__ import annotations

from pathlib import Path

import pytest

from ledger import Ledger
from ledger.runtime.handlers import Registry, Result, SyncJobContext
from ledger.runtime.source_listers import directory_lister

SYNC_TYPE = "docs.sync"


def docs_registry(root: Path, *, threshold: int = 3, cooldown_s: float = 300.0) -> Registry:
    """A registry polling ``root`` as source ``docs``; its sync handler reports the listing's
    revision, so an untouched file is unchanged at the next poll."""
    registry = Registry()
    registry.source(
        "docs",
        directory_lister(root),
        job_type=SYNC_TYPE,
        breaker_threshold=threshold,
        breaker_cooldown_s=cooldown_s,
    )

    @registry.handler(SYNC_TYPE)
    def sync(ctx: SyncJobContext) -> Result:
        assert ctx.subject is not None
        return Result(output={"op": ctx.subject.op.value}, revision=ctx.subject.revision)

    return registry


@pytest.fixture
def docs_dir(tmp_path: Path) -> Path:
    root = tmp_path / "docs"
    root.mkdir()
    return root


@pytest.fixture
def synced(ledger: Ledger) -> Ledger:
    """The ledger with the sync job type defined."""
    ledger.define(SYNC_TYPE)
    return ledger
