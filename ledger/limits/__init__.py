"""Limits, as a feature namespace: queue pauses, concurrency limits and rate buckets (what
:attr:`Ledger.limits <ledger.api.ledger.Ledger.limits>` hands out). The claim's own checks
of them are part of the claim, in :mod:`ledger.jobs`."""
