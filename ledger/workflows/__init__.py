"""Workflows: runs of steps with dependencies and approval gates, as a feature namespace.

What :attr:`Ledger.workflows <ledger.api.ledger.Ledger.workflows>` hands out. The pure spec,
events, fold and decisions are in :mod:`ledger.core.workflows`; the run views in
:mod:`ledger.store.workflow_reads`."""
