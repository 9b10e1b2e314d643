"""The history's integrity: its hash chain's head, checkpoints and verification
(``ledger.integrity``; docs/integrity.md)."""
