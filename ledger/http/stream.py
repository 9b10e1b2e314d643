"""``GET /api/v1/events/stream``: the log's new events as Server-Sent Events (docs/http.md).

Each message is ``id:`` the event's position (notification id), ``event:`` its name and
``data:`` one JSON object (:meth:`FeedEvent.to_json`). The stream opens with a ``:
connected`` comment (a client knows it is subscribed once it reads it) and sends ``:
keep-alive`` every :data:`KEEP_ALIVE_S` seconds of silence. ``Last-Event-ID`` (or ``after=``)
resumes after that position; without it the stream starts at the log's end.

A stream is only as good as what opened it: when a batch holds a ``token_revoked`` event
(any token's: the feed does not say whose), the stream reads its own token again and ends
before sending anything of that batch if the token is revoked; a stream opened with a
session cookie ends once the session is logged out (checked on every batch and every
keep-alive: a lookup in memory). So a revoked token or an ended session is sent nothing
that the log holds after its end. Revocation is an event, so every follower sees it in
order, whichever process revoked.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Collection, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated
from uuid import UUID

from anyio import to_thread
from litestar import Request, get
from litestar.datastructures import State
from litestar.exceptions import NotAuthorizedException, NotFoundException, ValidationException
from litestar.params import Parameter
from litestar.response import ServerSentEvent, ServerSentEventMessage

from ledger.api.event_feed import FeedEvent, TailPosition
from ledger.api.ledger import Ledger
from ledger.api.reader import Reader
from ledger.core.tokens import TokenRevoked, TokenState
from ledger.http.auth import CHALLENGE, Credential
from ledger.http.event_hub import END, EventHub, Subscription
from ledger.http.sessions import Sessions

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


@dataclass(frozen=True)
class Holder:
    """Who holds the stream open, checked again while it runs (see the module docstring)."""

    reader: Reader
    sessions: Sessions
    credential: Credential

    def session_live(self) -> bool:
        """Whether the session the stream was opened with is still logged in (a bearer
        token's stream has none: true)."""
        cookie = self.credential.session
        return cookie is None or self.sessions.token_of(cookie, self.now()) is not None

    def now(self) -> datetime:
        return self.reader.clock.now()

    async def may_read(self, batch: Sequence[FeedEvent]) -> bool:
        """Whether the stream may be sent ``batch``: its session live and, if the batch
        revokes a token, its own token still active."""
        if not self.session_live():
            return False
        if not any(item.event == TokenRevoked.name for item in batch):
            return True
        return await self.token_active()

    async def token_active(self) -> bool:
        token = await to_thread.run_sync(self.reader.tokens.get, self.credential.token_id)
        return token is not None and token.active


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
    request: Request[TokenState, Credential, State],
    caller: TokenState,
    event_hub: EventHub,
    ledger: Ledger,
    sessions: Sessions,
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
    only its org's events (another org: 404). The stream ends when its token is revoked or
    its session logged out."""
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
    holder = Holder(ledger, sessions, request.auth)
    # A revocation between the request's authentication and the join lies before the hub's
    # position, so no batch will bring it: read the token once more, now that it is final.
    if not await holder.token_active():
        event_hub.leave(subscription)
        raise NotAuthorizedException("the token is not valid", headers=CHALLENGE)
    return ServerSentEvent(messages(event_hub, subscription, admitted, start, holder))


async def messages(
    hub: EventHub,
    subscription: Subscription,
    admitted: StreamFilter,
    start: TailPosition | None,
    holder: Holder,
) -> AsyncIterator[ServerSentEventMessage]:
    """The stream's messages; leaving the hub however it ends (a client gone cancels it,
    its holder's token revoked or session ended ends it)."""
    try:
        yield ServerSentEventMessage(data=None, comment="connected")
        after = subscription.joined_at if start is None else start
        if after < subscription.joined_at:
            async for batch in backlog(hub, after, subscription.joined_at):
                if not await holder.may_read(batch):
                    return
                for item in batch:
                    if admitted.admits(item):
                        yield message(item)
            after = subscription.joined_at
        while True:
            try:
                batch = await asyncio.wait_for(subscription.queue.get(), KEEP_ALIVE_S)
            except TimeoutError:
                if not holder.session_live():
                    return
                yield ServerSentEventMessage(data=None, comment="keep-alive")
                continue
            if batch is END or not await holder.may_read(batch):
                return
            for item in batch:
                if item.at > after and admitted.admits(item):
                    yield message(item)
    finally:
        hub.leave(subscription)


async def backlog(
    hub: EventHub, after: TailPosition, upto: TailPosition
) -> AsyncIterator[Sequence[FeedEvent]]:
    """The events after ``after`` up to ``upto`` (the hub's position when the stream joined),
    in batches, read by the stream itself: the hub publishes only what comes after ``upto``."""
    while after < upto:
        batch = await to_thread.run_sync(hub.feed.after, after, BACKLOG_BATCH)
        if not batch:
            return
        kept = [item for item in batch if item.at <= upto]
        if kept:
            yield kept
        if len(kept) < len(batch):
            return
        after = batch[-1].at
