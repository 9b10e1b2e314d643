"""The API token reads: :class:`TokenReader`, what ``reader.tokens`` hands out."""

from __future__ import annotations

from uuid import UUID

from ledger.clock import Clock
from ledger.core.tokens import TokenState
from ledger.deprecation import warn_once
from ledger.store.store import Store
from ledger.tokens import token_writes
from ledger.views.kinds import TOKENS


class TokenReader:
    """The token reads over one store (hashes only: no secret is kept)."""

    def __init__(self, store: Store, clock: Clock) -> None:
        self.store = store
        self.clock = clock

    def __call__(self) -> list[TokenState]:
        """Deprecated: ``reader.tokens()`` was :meth:`all` before the namespace."""
        warn_once("Reader.tokens()", "reader.tokens.all()")
        return self.all()

    def all(self) -> list[TokenState]:
        """Every API token, revoked ones too, oldest first."""
        return self.store.states(TOKENS)

    def get(self, token_id: UUID) -> TokenState | None:
        """One API token by its id, revoked or not (``None``: no such token)."""
        return self.store.state(TOKENS, token_id)

    def authenticate(self, presented: str) -> TokenState | None:
        """The active token a bearer text is (``None``: unknown, revoked or wrong secret),
        compared in constant time on the secret's hash."""
        return token_writes.authenticate(self.store, presented)
