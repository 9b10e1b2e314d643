"""A pool's worker id, and the boot reap that reads it: the claims a dead process of the same
pool on this host left, ended as a pool starts.

The id is ``<pool>@<host>:<pid>``, one per process; a starting pool ends the claims under its
own ``<pool>@<host>:`` whose pid is no longer alive: released if their handler had not
started, failed as ``worker_lost`` if it had (:meth:`Ledger.boot_reap
<ledger.api.ledger.Ledger.boot_reap>`; a slot records each start before calling the handler,
:mod:`ledger.runtime.starts`).
"""

from __future__ import annotations

import logging
import os
import socket

from ledger.api.ledger import Ledger
from ledger.runtime.threads import ThreadLane

log = logging.getLogger("ledger.runtime.pool")  # the pool's logger, as before this module


def process_worker_id(pool_name: str, host: str | None = None) -> str:
    """``<pool>@<host>:<pid>``: one id per process, so a restarted pool can recognise the
    claims its dead predecessor on this host left behind (``host``: the host id, by default
    the hostname; see :attr:`PoolConfig.host <ledger.runtime.config.PoolConfig.host>`)."""
    return f"{pool_name}@{host or socket.gethostname()}:{os.getpid()}"


def pid_alive(worker_id: str) -> bool:
    """Whether the process ``worker_id`` names may still run (an id without a pid, or a pid
    this process may not signal, is not ours to judge: alive)."""
    pid_text = worker_id.rpartition(":")[2]
    if not pid_text.isdigit():
        return True  # not ours to judge
    pid = int(pid_text)
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


async def boot_reap(ledger: Ledger, io: ThreadLane, worker_id: str) -> None:
    """End the claims dead processes of ``worker_id``'s pool on this host left (on ``io``),
    and log what was released and which running jobs were failed as ``worker_lost``."""
    reaped = await io.run(ledger.boot_reap, worker_id.rpartition(":")[0] + ":", alive=pid_alive)
    if reaped.released:
        log.info("boot reap released %d unstarted claims of a dead process", len(reaped.released))
    for lost in reaped.lost:
        log.warning(
            "boot reap: job %s (%s) was running when its process died: attempt %d of %d "
            "failed as worker_lost, now %s",
            lost.job_id,
            lost.job_type,
            lost.attempt,
            lost.max_attempts,
            lost.status,
        )
