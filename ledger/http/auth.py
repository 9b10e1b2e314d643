"""Bearer tokens on every route but ``/health`` and the OpenAPI document, the roles' guard,
and the org a token's reads and writes are held to.

A missing, malformed, unknown, revoked or wrong token is one 401 with ``WWW-Authenticate:
Bearer`` (the answer never tells which). The secret is checked by the reader
(:meth:`~ledger.api.reader.Reader.authenticate`: the hash compared in constant time)."""

from __future__ import annotations

from typing import Any

from anyio import to_thread
from litestar import Request
from litestar.connection import ASGIConnection
from litestar.exceptions import NotAuthorizedException, NotFoundException, PermissionDeniedException
from litestar.handlers import BaseRouteHandler
from litestar.middleware import AbstractAuthenticationMiddleware, AuthenticationResult
from litestar.types import ASGIApp, Guard

from ledger.api.reader import Reader
from ledger.core.tokens import Role, TokenState

CHALLENGE = {"WWW-Authenticate": "Bearer"}
OPEN_PATHS = ["^/health$", "^/api/v1/schema"]
"""What needs no token: the health check and the OpenAPI document (it holds no data)."""


class TokenAuthentication(AbstractAuthenticationMiddleware):
    """Sets ``request.user`` to the caller's :class:`TokenState`, or answers 401."""

    def __init__(self, app: ASGIApp, reader: Reader) -> None:
        super().__init__(app, exclude=OPEN_PATHS)
        self.reader = reader

    async def authenticate_request(
        self, connection: ASGIConnection[Any, Any, Any, Any]
    ) -> AuthenticationResult:
        scheme, _, presented = connection.headers.get("authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not presented.strip():
            raise NotAuthorizedException("a bearer token is needed", headers=CHALLENGE)
        token = await to_thread.run_sync(self.reader.authenticate, presented.strip())
        if token is None:
            raise NotAuthorizedException("the token is not valid", headers=CHALLENGE)
        return AuthenticationResult(user=token, auth=token.token_id)


def needs(role: Role) -> Guard:
    """A guard refusing (403) a token whose role is below ``role``."""

    def guard(connection: ASGIConnection[Any, Any, Any, Any], _: BaseRouteHandler) -> None:
        token: TokenState = connection.user
        if not token.role.may(role):
            raise PermissionDeniedException(f"a {token.role.value} token may not do this")

    return guard


OPERATE = [needs(Role.OPERATE)]
"""The guards of a write: an ``operate`` or ``admin`` token."""


def spans_orgs(connection: ASGIConnection[Any, Any, Any, Any], _: BaseRouteHandler) -> None:
    """Refuse (403) an org-scoped token what concerns every org at once (job types, the
    views): it cannot be cut down to one org, and changing it touches the others'."""
    token: TokenState = connection.user
    if token.org is not None:
        raise PermissionDeniedException("an org-scoped token may not do this (it spans orgs)")


EVERY_ORG = [spans_orgs]
"""The guards of a read spanning orgs: a token of no org (of any role)."""
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
