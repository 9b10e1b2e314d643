"""A plain script: define a job, enqueue it, run a worker until the queue is idle, and print
the job's history (docs/testing.md, "Recipes"; tests/examples runs it).

    python examples/plain_script.py [LEDGER_URL]

Without a URL the ledger is a new SQLite file in a temporary directory.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
from pathlib import Path

from ledger import JobContext, Ledger, Registry, WorkerPool
from ledger.runtime.definitions import sync_definitions

registry = Registry()


@registry.handler("greet", max_attempts=3)
async def greet(ctx: JobContext) -> dict[str, str]:
    return {"greeting": f"hello, {ctx.payload['name']}"}


def main(url: str) -> None:
    with Ledger.open(url, create=True) as ledger:
        sync_definitions(ledger, registry)  # the job type, from its handler's options
        job_id = ledger.enqueue("greet", {"name": "Ada"}).job_id
        assert job_id is not None  # None only when a sync subject already has a live job
        stats = asyncio.run(WorkerPool(ledger, registry, concurrency=2).run_until_idle())
        print(f"worked {stats.claimed} job(s), {stats.succeeded} succeeded")
        for record in ledger.history(job_id):
            print(f"{record.originator_version}  {record.event.name}")
        job = ledger.get(job_id)
        assert job is not None
        print(f"status {job.status.value}, output {job.output}")


if __name__ == "__main__":
    if len(sys.argv) > 1:
        main(sys.argv[1])
    else:
        with tempfile.TemporaryDirectory() as directory:
            main(f"sqlite:///{Path(directory) / 'ledger.db'}")
