"""One ledger call from inside a host's namespace, for the dead-peer test.

Usage: ``python chaos_caller.py URL``. Opens the ledger (one pooled connection), prints
``open``, waits for a line on stdin, enqueues one job and prints how the call ended
(``returned`` or ``raised <code>``): a call that never ends prints nothing more.
"""

from __future__ import annotations

import sys

from ledger import Ledger
from ledger.core.errors import LedgerError


def main(url: str) -> int:
    with Ledger.open(url, pool_size=1) as ledger:
        print("open", flush=True)
        sys.stdin.readline()
        try:
            ledger.enqueue("netcut.probe", {})
            print("returned", flush=True)
        except LedgerError as exc:
            print(f"raised {exc.code}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
