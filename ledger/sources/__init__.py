"""Sources, as a feature namespace: a source's listing synced into jobs, its polls and their
breaker, and the sync-state reads (what :attr:`Ledger.sources
<ledger.api.ledger.Ledger.sources>` hands out)."""
