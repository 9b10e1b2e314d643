"""The Reader: what a read-only front end takes, over the same store as the ledger."""

from __future__ import annotations

from ledger import FakeClock, Ledger
from ledger.api.reader import Reader
from ledger.api.worker_commands import WorkerCommands


def test_a_reader_over_the_ledgers_store_sees_what_the_ledger_wrote(
    defined: Ledger, clock: FakeClock
) -> None:
    """Jobs, histories, counts and definitions read alike through a Reader and the Ledger."""
    job_id = defined.enqueue("t", {"n": 1}).job_id
    assert job_id is not None
    reader = Reader(defined.store, clock=clock)
    assert reader.get(job_id) == defined.get(job_id)
    assert reader.history(job_id) == defined.history(job_id)
    assert reader.counts() == defined.counts() == {"pending": 1}
    assert reader.definition("t") == defined.definition("t")
    assert [row.state.job_id for row in reader.jobs().jobs] == [job_id]


def test_a_reader_has_no_commands_and_the_ledger_is_a_reader() -> None:
    """Commands live on WorkerCommands and Ledger only; a Ledger can be passed as a Reader."""
    commands = {"enqueue", "enqueue_many", "define", "claim", "succeed", "cancel", "reap"}
    assert not commands & set(dir(Reader))
    assert {"claim", "heartbeat_many", "finish_many"} <= set(dir(WorkerCommands))
    assert issubclass(Ledger, WorkerCommands) and issubclass(WorkerCommands, Reader)
