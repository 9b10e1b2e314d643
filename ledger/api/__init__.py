"""The Python API: the ledger's commands and its reader."""
