"""Retention, as a feature namespace: the retention policy's rules and the runs that move
finished jobs to the archive (what :attr:`Ledger.retention
<ledger.api.ledger.Ledger.retention>` hands out)."""
