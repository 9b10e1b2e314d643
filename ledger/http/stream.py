"""``GET /api/v1/events/stream``: the log's new events as Server-Sent Events (docs/http.md).

Each message is ``id:`` the event's position (notification id), ``event:`` its name and
``data:`` one JSON object (:meth:`FeedEvent.to_json`). The stream opens with a ``:
connected`` comment (a client knows it is subscribed once it reads it) and sends ``:
keep-alive`` every :data:`KEEP_ALIVE_S` seconds of silence. ``Last-Event-ID`` (or ``after=``)
resumes after that position; without it the stream starts at the log's end.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Collection
from dataclasses import dataclass
from typing import Annotated
from uuid import UUID

from anyio import to_thread
from litestar import Request, get
from litestar.datastructures import State
from litestar.exceptions import NotFoundException, ValidationException
from litestar.params import Parameter
from litestar.response import ServerSentEvent, ServerSentEventMessage

from ledger.api.event_feed import FeedEvent, TailPosition
from ledger.core.tokens import TokenState
from ledger.http.event_hub import END, EventHub, Subscription

KEEP_ALIVE_S = 15.0
BACKLOG_BATCH = 500


@dataclass(frozen=True)
class StreamFilter:
    """What a stream lets through: each given set must hold the event's value (empty: any).
    ``orgs`` is ``None`` only for a token of no org asking for no org: every event."""

    jobs: frozenset[UUID]
    types: frozenset[str]
    orgs: frozenset[str] | None
    workflows: frozenset[UUID]
    events: frozenset[str]

    def admits(self, item: FeedEvent) -> bool:
        if self.orgs is not None and item.org not in self.orgs:
            return False  # an org-scoped token never sees an event of no org
        return (
            (not self.jobs or item.job_id in self.jobs)
            and (not self.types or item.job_type in self.types)
            and (not self.workflows or item.workflow_run_id in self.workflows)
            and (not self.events or item.event in self.events)
        )


def stream_orgs(caller: TokenState, asked: Collection[str]) -> frozenset[str] | None:
    """The orgs a caller's stream is held to: an org token's own (asking for another: 404),
    else what was asked (``None``: every event, those of no org too)."""
    if caller.org is None:
        return frozenset(asked) if asked else None
    for org in asked:
        if org != caller.org:
            raise NotFoundException(f"no org {org!r} for this token")
    return frozenset({caller.org})


def message(item: FeedEvent) -> ServerSentEventMessage:
    return ServerSentEventMessage(
        id=item.position, event=item.event, data=json.dumps(item.to_json(), separators=(",", ":"))
    )


def resume_position(last_event_id: str | None, after: int | None) -> int | None:
    """The position asked to resume after (``Last-Event-ID`` wins over ``after=``)."""
    if last_event_id is not None and last_event_id.strip():
        try:
            return int(last_event_id.strip())
        except ValueError:
            raise ValidationException("Last-Event-ID must be an event's position") from None
    return after


@get("/events/stream")
async def event_stream(
    request: Request[TokenState, str, State],
    caller: TokenState,
    event_hub: EventHub,
    *,
    job: list[UUID] | None = None,
    job_type: Annotated[list[str] | None, Parameter(query="type")] = None,
    org: list[str] | None = None,
    workflow: list[UUID] | None = None,
    event: list[str] | None = None,
    after: Annotated[int | None, Parameter(ge=0)] = None,
) -> ServerSentEvent:
    """New events as Server-Sent Events, filtered (every filter repeatable, all optional);
    ``Last-Event-ID`` or ``after`` resumes after a position. Any role; an org token sees
    only its org's events (another org: 404)."""
    admitted = StreamFilter(
        frozenset(job or ()),
        frozenset(job_type or ()),
        stream_orgs(caller, org or ()),
        frozenset(workflow or ()),
        frozenset(event or ()),
    )
    asked = resume_position(request.headers.get("last-event-id"), after)
    start: TailPosition | None = None
    if asked is not None:
        start = await to_thread.run_sync(event_hub.feed.position_of, asked)
        if start is None:
            raise NotFoundException(f"no event at position {asked}")
    subscription = await to_thread.run_sync(event_hub.join, asyncio.get_running_loop())
    return ServerSentEvent(messages(event_hub, subscription, admitted, start))


async def messages(
    hub: EventHub, subscription: Subscription, admitted: StreamFilter, start: TailPosition | None
) -> AsyncIterator[ServerSentEventMessage]:
    """The stream's messages; leaving the hub however it ends (a client gone cancels it)."""
    try:
        yield ServerSentEventMessage(data=None, comment="connected")
        after = subscription.joined_at if start is None else start
        if after < subscription.joined_at:
            async for item in backlog(hub, after, subscription.joined_at):
                if admitted.admits(item):
                    yield message(item)
            after = subscription.joined_at
        while True:
            try:
                batch = await asyncio.wait_for(subscription.queue.get(), KEEP_ALIVE_S)
            except TimeoutError:
                yield ServerSentEventMessage(data=None, comment="keep-alive")
                continue
            if batch is END:
                return
            for item in batch:
                if item.at > after and admitted.admits(item):
                    yield message(item)
    finally:
        hub.leave(subscription)


async def backlog(
    hub: EventHub, after: TailPosition, upto: TailPosition
) -> AsyncIterator[FeedEvent]:
    """The events after ``after`` up to ``upto`` (the hub's position when the stream joined),
    read by the stream itself: the hub publishes only what comes after ``upto``."""
    while after < upto:
        batch = await to_thread.run_sync(hub.feed.after, after, BACKLOG_BATCH)
        if not batch:
            return
        for item in batch:
            if item.at > upto:
                return
            yield item
        after = batch[-1].at
