"""A handler application for the re-execution tests (``--app replay_app:registry``)."""

from __future__ import annotations

from typing import Any

from ledger.runtime.handlers import JobContext, PermanentError, Registry, Result, TransientError

registry = Registry()


@registry.handler("r")
async def echo(ctx: JobContext) -> Any:
    """Reports progress and a heartbeat, then returns what it saw; the payload steers it."""
    await ctx.progress(stage="running", done=1, total=2)
    await ctx.heartbeat()
    behaviour = ctx.payload.get("name")
    if behaviour == "permanent":
        raise PermanentError("unsupported document", code="doc.unsupported")
    if behaviour == "transient":
        raise TransientError("upstream busy")
    if behaviour == "crash":
        raise ValueError("boom")
    if behaviour == "not-json":
        return {"when": object()}
    if behaviour == "result":
        return Result(output={"ok": True}, revision="r9", content_hash="h9")
    return {"payload": ctx.payload, "checkpoint": ctx.checkpoint, "attempt": ctx.attempt}


@registry.handler("s")
def blocking(ctx: JobContext) -> Any:
    """A sync handler: runs in a thread and reports through the blocking calls."""
    ctx.progress_blocking(checkpoint={"page": 2})
    ctx.heartbeat_blocking()
    return {"checkpoint": ctx.checkpoint}


@registry.handler("join")
async def join(ctx: JobContext) -> Any:
    """A workflow step: returns what its prerequisites recorded."""
    return await ctx.prerequisite_outputs()
