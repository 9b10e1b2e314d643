"""``enqueued(ledger)``'s span starts where the block begins, even while the tail's head lags.

On PostgreSQL the tail's final prefix stops before any event a transaction still open might
yet precede, so a job committed just before the block, while an older transaction was open,
is read *after* the block's start position once that transaction ends. It is not the
block's job (found by CI: tests/schedules' hand-made slot job was counted as the firing's
once, while some older transaction on the server happened to be open). Its mirror: a job
the block enqueued is the block's even while an older transaction keeps it out of the final
prefix when the block ends (found by a suite run: the plugin's inline-enqueue test saw no job).
"""

from __future__ import annotations

import psycopg

from ledger import FakeClock, Ledger
from ledger.testing import enqueued


def test_a_job_committed_before_the_block_is_not_the_blocks_while_an_older_one_is_open(
    pg_url: str, clock: FakeClock
) -> None:
    with Ledger.open(pg_url, clock=clock) as ledger:
        ledger.define("t")
        with psycopg.connect(pg_url) as older:
            # An open transaction with an id: the tail's head stops before what commits next.
            older.execute("SELECT pg_current_xact_id()")
            before = ledger.enqueue("t", {"n": 1}).job_id
            with enqueued(ledger) as span:
                older.rollback()  # the job above becomes final in tail order, after the start
                inside = ledger.enqueue("t", {"n": 2}).job_id
        assert before not in span.job_ids
        assert span.job_ids == [inside]


def test_a_job_the_block_enqueued_is_the_blocks_while_an_older_transaction_is_open(
    pg_url: str, clock: FakeClock
) -> None:
    with Ledger.open(pg_url, clock=clock) as ledger:
        ledger.define("t")
        with psycopg.connect(pg_url) as older:
            with enqueued(ledger) as span:
                older.execute("SELECT pg_current_xact_id()")
                inside = ledger.enqueue("t", {"n": 1}).job_id
            # The block has ended while the older transaction holds the tail's head back
            # (before the fix, the span ended there, without the job); it ends later, as
            # one in another test or process would, and a job enqueued after the block is
            # final then too.
            older.rollback()
            after = ledger.enqueue("t", {"n": 2}).job_id
            assert span.job_ids == [inside]
        assert after not in span.job_ids
