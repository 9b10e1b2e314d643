"""API token commands: create (the secret returned once), revoke, and the check a server
makes of a bearer secret. Each command is an event in the token's own stream."""

from __future__ import annotations

import secrets
from typing import NamedTuple
from uuid import UUID, uuid4

from ledger.clock import Clock
from ledger.core.errors import InvalidRequestError
from ledger.core.requests import check_reason
from ledger.core.tokens import (
    TokenCreated,
    TokenRevoked,
    TokenState,
    bearer,
    check_role,
    digest,
    matches,
    parse_bearer,
)
from ledger.store.store import Store
from ledger.views.kinds import TOKENS

SECRET_BYTES = 32


class TokenNotFoundError(InvalidRequestError):
    """No token with this id."""

    code = "token.not_found"


class CreatedToken(NamedTuple):
    token: TokenState
    secret: str
    """The bearer text (``jlt_<id>_<secret>``): shown once, stored nowhere."""


def create_token(
    store: Store, clock: Clock, *, org: str | None, role: str, label: str | None
) -> CreatedToken:
    """A new token of ``role`` scoped to ``org`` (``None``: every org; admin tokens only)."""
    checked = check_role(role)
    if org is None and checked.value != "admin":
        raise InvalidRequestError("a read or operate token needs an --org")
    token_id = uuid4()
    secret = secrets.token_urlsafe(SECRET_BYTES)
    event = TokenCreated(
        at=clock.now(),
        token_id=token_id,
        org=org,
        role=checked.value,
        label=label,
        secret_sha256=digest(secret),
    )
    with store.unit_of_work() as uow:
        uow.append([TOKENS.change(token_id, [event])])
        created = uow.state(TOKENS, token_id)
    assert created is not None
    return CreatedToken(created, bearer(token_id, secret))


def revoke_token(store: Store, clock: Clock, token_id: UUID, reason: str) -> TokenState:
    """Stop accepting a token (a revoked one again is refused, ``request.invalid``)."""
    check_reason(reason)
    with store.unit_of_work() as uow:
        uow.serialise_appends()  # two revokes at once must not both pass the check
        current = uow.state(TOKENS, token_id)
        if current is None:
            raise TokenNotFoundError(f"no token {token_id}")
        if not current.active:
            raise InvalidRequestError(f"token {token_id} is already revoked")
        event = TokenRevoked(at=clock.now(), token_id=token_id, reason=reason)
        uow.append([TOKENS.change(token_id, [event])])
        revoked = uow.state(TOKENS, token_id)
    assert revoked is not None
    return revoked


def authenticate(store: Store, presented: str) -> TokenState | None:
    """The active token whose bearer text ``presented`` is (``None``: unknown, revoked or
    wrong secret — one answer for all, so a caller learns nothing from the difference)."""
    parsed = parse_bearer(presented)
    if parsed is None:
        return None
    token_id, secret = parsed
    token = store.state(TOKENS, token_id)
    if token is None or not matches(token, secret) or not token.active:
        return None
    return token
