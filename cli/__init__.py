"""The ``jobledger`` command line: a thin shell over :class:`ledger.Ledger`.

Each command opens the ledger, makes one or two API calls and prints the result as aligned
text or, with ``--json``, as JSON on stdout. Failures print one ``error: …`` line on stderr
(see :mod:`cli.errors`). ``docs/cli.md`` is the reference.
"""
