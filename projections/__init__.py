"""The projection runners: what rebuilds, verifies, follows and reports on the views.

They sit above the store (they open its read snapshots and write transactions); the pure rules
they run, rows from events, are :mod:`ledger.views`, below the store. Nothing below imports
this package.
"""
