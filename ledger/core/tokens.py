"""API tokens: their events, roles and fold, and how a secret is checked. Pure.

A token is a stream of its own (its id is the stream id): ``token_created`` then, perhaps,
``token_revoked``. The events carry the secret's SHA-256, never the secret: the secret is
shown once, when it is made, and the ledger could not show it again. A bearer secret reads
``jlt_<token id, 32 hex>_<secret>``, so the server finds the token by its id and compares
the hashes in constant time (not a lookup by hash, which would compare in the index).
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from uuid import UUID

import msgspec

from ledger.core.errors import InvalidRequestError
from ledger.core.events import Event
from ledger.core.state import IllegalTransitionError

PREFIX = "jlt_"


class Role(StrEnum):
    """What a token may do: ``read`` reads; ``operate`` also retries, cancels, enqueues and
    completes steps; ``admin`` also defines job types (and, without an org, sees every org)."""

    READ = "read"
    OPERATE = "operate"
    ADMIN = "admin"

    def may(self, needed: Role) -> bool:
        return ORDER.index(self) >= ORDER.index(needed)


ORDER = (Role.READ, Role.OPERATE, Role.ADMIN)


class TokenCreated(Event, frozen=True):
    """A token is made: (none) -> active. ``secret_sha256`` is the hex SHA-256 of the secret."""

    name = "token_created"
    token_id: UUID
    org: str | None
    role: str
    label: str | None
    secret_sha256: str


class TokenRevoked(Event, frozen=True):
    """A token stops being accepted: active -> revoked."""

    name = "token_revoked"
    token_id: UUID
    reason: str


TOKEN_EVENTS: tuple[type[Event], ...] = (TokenCreated, TokenRevoked)


class TokenState(msgspec.Struct, frozen=True):
    """A token as its stream tells it (the tokens view's row)."""

    token_id: UUID
    org: str | None
    role: Role
    label: str | None
    secret_sha256: str
    created_at: datetime
    revoked_at: datetime | None
    version: int

    @property
    def active(self) -> bool:
        return self.revoked_at is None


def evolve_token(state: TokenState | None, event: Event) -> TokenState:
    """Apply one token event. Pure."""
    if isinstance(event, TokenCreated):
        if state is not None:
            raise IllegalTransitionError(f"token {state.token_id} created twice")
        return TokenState(
            event.token_id,
            event.org,
            Role(event.role),
            event.label,
            event.secret_sha256,
            event.at,
            None,
            1,
        )
    if isinstance(event, TokenRevoked):
        if state is None:
            raise IllegalTransitionError("token_revoked before token_created")
        if not state.active:
            raise IllegalTransitionError(f"token {state.token_id} revoked twice")
        return msgspec.structs.replace(state, revoked_at=event.at, version=state.version + 1)
    raise IllegalTransitionError(f"not a token event: {type(event).__name__}")


def digest(secret: str) -> str:
    # hashlib and hmac load OpenSSL (~4 ms): imported where a secret is hashed, not by every
    # process that decodes events (a CLI read).
    import hashlib

    return hashlib.sha256(secret.encode()).hexdigest()


def bearer(token_id: UUID, secret: str) -> str:
    """The text a client sends: the id (to find the token) and the secret (to prove it)."""
    return f"{PREFIX}{token_id.hex}_{secret}"


def parse_bearer(text: str) -> tuple[UUID, str] | None:
    """The token id and secret of a bearer text (``None``: not one of ours)."""
    if not text.startswith(PREFIX):
        return None
    ident, sep, secret = text[len(PREFIX) :].partition("_")
    if not sep or not secret:
        return None
    try:
        return UUID(hex=ident), secret
    except ValueError:
        return None


def matches(state: TokenState, secret: str) -> bool:
    """Whether ``secret`` is the token's, compared in constant time on the hashes."""
    import hmac

    return hmac.compare_digest(state.secret_sha256, digest(secret))


def check_role(role: str) -> Role:
    try:
        return Role(role)
    except ValueError:
        raise InvalidRequestError(
            f"unknown role {role!r}; known: {', '.join(r.value for r in ORDER)}"
        ) from None
