"""Helpers for testing code that enqueues and handles jobs (as River ships ``rivertest``).

Use a real ledger (an SQLite file is enough), a :class:`FakeClock` to move time, and one of
these to work the queue with your registry::

    from ledger import Ledger
    from ledger.testing import FakeClock, drain

    from myapp.jobs import registry  # your Registry of handlers


    async def test_a_welcome_email_is_sent(tmp_path):
        clock = FakeClock()
        url = f"sqlite:///{tmp_path}/ledger.db"
        with Ledger.open(url, create=True, clock=clock, auto_define=True) as ledger:
            job_id = ledger.enqueue("email.welcome", {"to": "ada@example.com"})
            stats = await drain(ledger, registry)
            assert stats.succeeded == 1
            assert ledger.get(job_id).output == {"sent_to": "ada@example.com"}

            flaky = ledger.enqueue("email.welcome", {"to": "down@example.com"})
            await drain(ledger, registry)  # say the handler raised TransientError:
            assert ledger.get(flaky).status == "pending"  # a retry is scheduled …
            clock.advance(3600)  # … and due once the clock has moved past its backoff
            assert (await drain(ledger, registry)).claimed == 1

:func:`drain` is deterministic: one job at a time on the calling task, every outcome recorded
before it returns, so a test can assert right after it. :func:`run_until_idle` runs a real
:class:`~ledger.runtime.pool.WorkerPool` (concurrent slots, batched completions, the
definitions synced from the registry) until nothing is due, which is what a test of
concurrency or of the pool's own settings wants; with ``advance_clock=True`` it also moves a
fake clock over backoffs and delays until no job of the registry's is waiting. Both take the
pool's settings as keyword arguments (``types=``, ``lease_s=``, ``concurrency=`` …, see
:class:`~ledger.runtime.config.PoolConfig`).

:class:`InlineLedger` runs the handlers at enqueue (:mod:`ledger.testing.inline`);
:func:`enqueued`, :func:`assert_enqueued` and :func:`refute_enqueued` assert what was
enqueued, from the history (:mod:`ledger.testing.enqueued`). The pytest plugin
(:mod:`ledger.testing.pytest_plugin`, docs/testing.md) offers all of it as fixtures.
"""

from __future__ import annotations

from ledger.clock import FakeClock
from ledger.testing.enqueued import (
    EnqueuedJob,
    EnqueuedJobs,
    assert_enqueued,
    enqueued,
    refute_enqueued,
)
from ledger.testing.inline import InlineLedger
from ledger.testing.workers import drain, run_until_idle, sync_definitions, work_job

__all__ = [
    "EnqueuedJob",
    "EnqueuedJobs",
    "FakeClock",
    "InlineLedger",
    "assert_enqueued",
    "drain",
    "enqueued",
    "refute_enqueued",
    "run_until_idle",
    "sync_definitions",
    "work_job",
]
