"""Workflows, the pure part: a run's spec and its validation, its events, its fold and the
decisions that release, fail and cancel its steps (``docs/workflows.md``).

Pure like the rest of :mod:`ledger.core`: no store, driver or clock. The store wires these
into a unit of work (a policy on job events, the release lock, the workflow view).
"""
