"""API tokens, as a feature namespace: create, revoke, list and authenticate them (what
:attr:`Ledger.tokens <ledger.api.ledger.Ledger.tokens>` hands out)."""
