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
            job = ledger.enqueue("email.welcome", {"to": "ada@example.com"})
            stats = await drain(ledger, registry)
            assert stats.succeeded == 1
            assert job.output() == {"sent_to": "ada@example.com"}

            flaky = ledger.enqueue("email.welcome", {"to": "down@example.com"})
            await drain(ledger, registry)  # say the handler raised TransientError:
            assert flaky.status() == "pending"  # a retry is scheduled …
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

The names below are loaded lazily (PEP 562), as :mod:`ledger`'s are: pytest imports the plugin
module, and so this package, at the start of every run wherever jobledger is installed, and
that must not load the runtime, the store and their drivers for a suite that never asks.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

_EXPORTS: dict[str, str] = {
    "EnqueuedJob": "ledger.testing.enqueued",
    "EnqueuedJobs": "ledger.testing.enqueued",
    "FakeClock": "ledger.clock",
    "InlineLedger": "ledger.testing.inline",
    "assert_enqueued": "ledger.testing.enqueued",
    "drain": "ledger.testing.workers",
    "enqueued": "ledger.testing.enqueued",
    "refute_enqueued": "ledger.testing.enqueued",
    "run_until_idle": "ledger.testing.workers",
    "sync_definitions": "ledger.testing.workers",
    "work_job": "ledger.testing.workers",
}

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


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'ledger.testing' has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


if TYPE_CHECKING:  # what type checkers and editors see; never executed
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
