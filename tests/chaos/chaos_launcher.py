"""A worker process for the chaos suite: ``jobledger worker`` with the reaper's knobs.

``jobledger worker`` on this base has no ``--reaper-interval`` / ``--reaper-retry-delay``
(they are being added in another branch), and the chaos suite needs a reaper that runs every
fraction of a second to measure recovery. This script builds the same pool from a
:class:`~ledger.runtime.config.PoolConfig` with those set and serves it with the CLI's own
signal handling (:func:`cli.worker._serve`: first SIGINT/SIGTERM stops gracefully, a second
at once), so a test signals it exactly as it would signal ``jobledger worker``. Once the CLI
has the options, the suite can start ``jobledger worker`` instead.

Usage: ``python chaos_launcher.py URL --name N --concurrency C --lease S
--reaper-interval S --reaper-retry-delay S [--grace S] [--poll S]``.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys

from chaos_app import READY, registry

from jobledger_cli.worker import _serve
from ledger.api.ledger import Ledger
from ledger.runtime.config import PoolConfig, worker_idle_in_transaction_s
from ledger.runtime.health import PoolStats
from ledger.runtime.pool import WorkerPool


async def _serve_announced(pool: WorkerPool, grace_s: float) -> PoolStats:
    """:func:`_serve`, printing ``ready <worker id>`` once its signal handlers are installed
    and its workers run (a signal before that would meet Python's default handlers)."""
    serving = asyncio.ensure_future(_serve(pool, grace_s))
    while pool.live_workers == 0 and not serving.done():
        await asyncio.sleep(0.01)
    print(f"{READY} {pool.worker_id}", file=sys.stderr, flush=True)
    return await serving


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="chaos_launcher")
    parser.add_argument("url")
    parser.add_argument("--name", default="chaos")
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--lease", type=float, default=3.0)
    parser.add_argument("--reaper-interval", type=float, default=0.5)
    parser.add_argument("--reaper-retry-delay", type=float, default=0.2)
    parser.add_argument("--grace", type=float, default=10.0)
    parser.add_argument("--poll", type=float, default=0.2)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    config = PoolConfig(
        name=args.name,
        concurrency=args.concurrency,
        lease_s=args.lease,
        poll_interval_s=args.poll,
        reaper_interval_s=args.reaper_interval,
        reaper_retry_delay_s=args.reaper_retry_delay,
    )
    idle_s = worker_idle_in_transaction_s(args.lease)  # as `jobledger worker` does
    with Ledger.open(args.url, pool_size=4, idle_in_transaction_s=idle_s) as ledger:
        pool = WorkerPool(ledger, registry, config)
        stats = asyncio.run(_serve_announced(pool, args.grace))
    print(
        f"claimed {stats.claimed}, succeeded {stats.succeeded}, released {stats.released}, "
        f"lost leases {stats.fenced_out}",
        file=sys.stderr,
        flush=True,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
