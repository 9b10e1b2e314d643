"""The tokens view: one row per API token, the fold of its stream (hash only, never a
secret: the events never held one)."""

from __future__ import annotations

from typing import Any
from uuid import UUID

from ledger.core.times import from_us, to_us
from ledger.core.tokens import TOKEN_EVENTS, Role, TokenState, evolve_token
from ledger.views.kind import StateKind
from ledger.views.view import Projection

PROJECTION = Projection(  # secret_hash: the hex SHA-256 of the secret
    "tokens",
    1,
    "jl_tokens",
    ("token_id",),
    (
        "token_id",
        "org",
        "role",
        "label",
        "secret_hash",
        "created_at",
        "revoked_at",
        "stream_version",
    ),
    "schema_tokens",
    tuple(cls.name for cls in TOKEN_EVENTS),
    description="one row per API token: org, role, the secret's SHA-256, revoked or not",
)


def token_row(state: TokenState) -> dict[str, Any]:
    """The view row of a token (ids as text, times as µs since the epoch)."""
    return {
        "token_id": str(state.token_id),
        "org": state.org,
        "role": state.role.value,
        "label": state.label,
        "secret_hash": state.secret_sha256,
        "created_at": to_us(state.created_at),
        "revoked_at": None if state.revoked_at is None else to_us(state.revoked_at),
        "stream_version": state.version,
    }


def token_of_row(row: Any) -> TokenState:
    """A ``jl_tokens`` row (indexable by column name) as the token's state."""
    revoked_at = row["revoked_at"]
    return TokenState(
        UUID(str(row["token_id"])),
        row["org"],
        Role(row["role"]),
        row["label"],
        row["secret_hash"],
        from_us(int(row["created_at"])),
        None if revoked_at is None else from_us(int(revoked_at)),
        int(row["stream_version"]),
    )


KIND: StateKind[UUID, TokenState] = StateKind(
    "tokens",
    TOKEN_EVENTS,
    evolve_token,
    lambda token_id: token_id,  # a token's stream id is its id
    PROJECTION,
    token_row,
    token_of_row,
    upsert="tokens_upsert",
    get="tokens_get",
    all="tokens_all",
    key_param="token_id",
    bind_key=str,
    key_of=lambda state: state.token_id,
)
"""API tokens, by id."""
