"""The API token commands: :class:`TokenCommands`, what ``ledger.tokens`` hands out: the reads
of :class:`~ledger.tokens.token_reader.TokenReader` plus create and revoke
(:mod:`ledger.tokens.token_writes`)."""

from __future__ import annotations

from uuid import UUID

from ledger.core.tokens import TokenState
from ledger.jobs.binding import LedgerBinding
from ledger.tokens import token_writes
from ledger.tokens.token_reader import TokenReader


class TokenCommands(TokenReader):
    """The token reads and commands of one ledger."""

    def __init__(self, bound: LedgerBinding) -> None:
        super().__init__(bound.store, bound.clock)

    def create(
        self, *, org: str | None, role: str, label: str | None = None
    ) -> token_writes.CreatedToken:
        """A new API token (``token_created``); its bearer secret is returned once only."""
        return token_writes.create_token(self.store, self.clock, org=org, role=role, label=label)

    def revoke(self, token_id: UUID, *, reason: str = "revoked by operator") -> TokenState:
        """Stop accepting an API token (``token_revoked``)."""
        return token_writes.revoke_token(self.store, self.clock, token_id, reason)
