"""The project's jobs and its one ledger: ``get_ledger()`` opens the ledger named by
``settings.JOBLEDGER_DB`` on first use and hands the same one to every later caller in the
process (a ledger holds a connection pool: one per process, not one per request).

    jobledger worker --app jobs:registry    # from this folder; --db defaults to $JOBLEDGER_DB
"""

from __future__ import annotations

import atexit
import functools

import settings

from ledger import Ledger, Registry, SyncJobContext

registry = Registry()


@registry.job("mail.welcome", max_attempts=3)
def send_welcome(ctx: SyncJobContext, *, user_id: int) -> dict[str, int]:
    return {"welcomed": user_id}


@functools.cache
def get_ledger() -> Ledger:
    """The process's ledger, opened on first use (not at import: a management command that
    never enqueues opens no pool), closed when the process exits."""
    ledger = Ledger.open(settings.JOBLEDGER_DB, create=True)
    atexit.register(ledger.close)
    return ledger
