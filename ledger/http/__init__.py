"""The HTTP control plane (``jobledger serve``): a thin Litestar front end over the reader,
its JSON shapes and the ledger's commands, beside the CLI (neither imports the other)."""
