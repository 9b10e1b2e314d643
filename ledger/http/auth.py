"""Bearer tokens on every route but ``/health``, the OpenAPI document, the login page and
the static files; the dashboard's session cookie on its pages and on the event stream; the
roles' guard, and the org a token's reads and writes are held to.

A missing, malformed, unknown, revoked or wrong token is one 401 with ``WWW-Authenticate:
Bearer`` (the answer never tells which). The secret is checked by the reader's tokens
(:meth:`~ledger.tokens.token_reader.TokenReader.authenticate`: the hash compared in constant
time); a session cookie by :class:`~ledger.http.sessions.Sessions` (a logged-out one is
refused), then its token read again (a revoked token's session ends at once).
``request.auth`` is the :class:`Credential`: the event stream checks it again while it runs.

CSRF: a browser sends the cookie with any request to this origin, a cross-site form's
included (SameSite=Strict stops that in today's browsers; this does not rely on it). So a
request authenticated by the cookie that is not a GET must carry ``HX-Request: true``, a
header a cross-site form cannot set and a cross-site script cannot send without a CORS
preflight this server never grants; without it, 403 and nothing is done."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from uuid import UUID

from anyio import to_thread
from litestar import Request
from litestar.connection import ASGIConnection
from litestar.exceptions import NotAuthorizedException, NotFoundException, PermissionDeniedException
from litestar.handlers import BaseRouteHandler
from litestar.middleware import AbstractAuthenticationMiddleware, AuthenticationResult
from litestar.types import ASGIApp, Guard

from ledger.api.reader import Reader
from ledger.core.tokens import Role, TokenState
from ledger.http.sessions import COOKIE, Sessions

CHALLENGE = {"WWW-Authenticate": "Bearer"}
OPEN_PATHS = ["^/health$", "^/api/v1/schema", "^/login$", "^/static/"]
"""What needs no token: the health check, the OpenAPI document (it holds no data), the
login page and the dashboard's static files."""
STREAM_PATH = "/api/v1/events/stream"
"""The one API route a session cookie is accepted on: the pages' ``EventSource`` cannot
send a bearer header either."""
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


def takes_cookie(path: str) -> bool:
    """Whether a session cookie authenticates a request for ``path`` (the dashboard's pages
    and the event stream; the rest of the API and /metrics take only the bearer header)."""
    return (not path.startswith("/api/") and path != "/metrics") or path == STREAM_PATH


@dataclass(frozen=True)
class Credential:
    """What a request was authenticated with: the token, and the session cookie when the
    token came from a login (``None``: the bearer header)."""

    token_id: UUID
    session: str | None = None


def bearer_token(
    reader: Reader, connection: ASGIConnection[Any, Any, Any, Any]
) -> TokenState | None:
    """The active token of the request's ``Authorization: Bearer`` header, if any (for a
    route open to all that answers more to a token: ``/health``). Blocking: a thread's."""
    scheme, _, presented = connection.headers.get("authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not presented.strip():
        return None
    return reader.tokens.authenticate(presented.strip())


class TokenAuthentication(AbstractAuthenticationMiddleware):
    """Sets ``request.user`` to the caller's :class:`TokenState`, or answers 401."""

    def __init__(self, app: ASGIApp, reader: Reader, sessions: Sessions) -> None:
        super().__init__(app, exclude=OPEN_PATHS)
        self.reader = reader
        self.sessions = sessions

    async def authenticate_request(
        self, connection: ASGIConnection[Any, Any, Any, Any]
    ) -> AuthenticationResult:
        cookie = connection.cookies.get(COOKIE)
        if (
            "authorization" not in connection.headers
            and cookie
            and takes_cookie(connection.url.path)
        ):
            return await self._session(connection, cookie)
        scheme, _, presented = connection.headers.get("authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not presented.strip():
            raise NotAuthorizedException("a bearer token is needed", headers=CHALLENGE)
        token = await to_thread.run_sync(self.reader.tokens.authenticate, presented.strip())
        if token is None:
            raise NotAuthorizedException("the token is not valid", headers=CHALLENGE)
        return AuthenticationResult(user=token, auth=Credential(token.token_id))

    async def _session(
        self, connection: ASGIConnection[Any, Any, Any, Any], cookie: str
    ) -> AuthenticationResult:
        token_id = self.sessions.token_of(cookie, self.reader.clock.now())
        read = self.reader.tokens.get
        token = None if token_id is None else await to_thread.run_sync(read, token_id)
        if token is None or not token.active:
            raise NotAuthorizedException("the session has ended: log in again")
        if connection.scope.get("method", "GET") not in SAFE_METHODS and (
            connection.headers.get("hx-request") != "true"
        ):
            raise PermissionDeniedException(
                "a change made with the session cookie must come from the dashboard's own "
                "page (HX-Request header missing)"
            )
        return AuthenticationResult(user=token, auth=Credential(token.token_id, cookie))


def needs(role: Role) -> Guard:
    """A guard refusing (403) a token whose role is below ``role``."""

    def guard(connection: ASGIConnection[Any, Any, Any, Any], _: BaseRouteHandler) -> None:
        token: TokenState = connection.user
        if not token.role.may(role):
            raise PermissionDeniedException(f"a {token.role.value} token may not do this")

    return guard


OPERATE = [needs(Role.OPERATE)]
"""The guards of a write: an ``operate`` or ``admin`` token."""


def sees_every_org(token: TokenState | None) -> bool:
    """The one rule for what concerns every org at once (job types, the views, the worker
    pools with their hosts and pids, the metrics): only a token of no org sees it. The API
    routes (:data:`EVERY_ORG`), the dashboard's pages and sections, and ``/health``'s
    details all ask this, so a page never shows what the API refuses."""
    return token is not None and token.org is None


def spans_orgs(connection: ASGIConnection[Any, Any, Any, Any], _: BaseRouteHandler) -> None:
    """Refuse (403) an org-scoped token what concerns every org at once: it cannot be cut
    down to one org, and changing it touches the others'."""
    if not sees_every_org(connection.user):
        raise PermissionDeniedException("an org-scoped token may not do this (it spans orgs)")


EVERY_ORG = [spans_orgs]
"""The guards of a read spanning orgs (an API route or a page): a token of no org (of any
role)."""
ADMIN = [needs(Role.ADMIN), spans_orgs]
"""The guards of a write spanning orgs: an ``admin`` token of no org."""


def caller_of(request: Request[Any, Any, Any]) -> TokenState:
    """The ``caller`` dependency: the token the request was authenticated with."""
    token: TokenState = request.user
    return token


def scoped_org(caller: TokenState, asked: str | None) -> str | None:
    """The org filter a read runs with: the token's own (an org-scoped token asking for
    another org finds nothing: 404), else what was asked."""
    if caller.org is None:
        return asked
    if asked is not None and asked != caller.org:
        raise NotFoundException(f"no org {asked!r} for this token")
    return caller.org


def visible(caller: TokenState, org: str | None) -> bool:
    """Whether the caller may see a thing of ``org`` (one job, one run)."""
    return caller.org is None or caller.org == org


def actor(caller: TokenState) -> str:
    """How an API write names its token in the event's reason (docs/http.md)."""
    return f"api token {caller.token_id}"
