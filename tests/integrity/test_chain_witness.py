"""Who extends the chain: a pool's chain witness service, any number side by side, and the
checkpoints they append (signed by the one that holds the key)."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from ledger import FakeClock, Ledger
from ledger.maintenance.chain_witness import ChainWitness, ChainWitnessConfig
from ledger.runtime.config import PoolConfig
from projections.chain import ChainRunner


@pytest.fixture
def busy(ledger: Ledger) -> Iterator[Ledger]:
    ledger.define("t")
    for i in range(20):
        ledger.enqueue("t", {"i": i})
    yield ledger


def test_a_pool_runs_the_witness_unless_its_interval_is_zero() -> None:
    assert PoolConfig().chain_witness_config() == ChainWitnessConfig()
    assert PoolConfig(integrity_interval_s=0).chain_witness_config() is None
    with pytest.raises(ValueError, match="integrity_interval_s"):
        PoolConfig(integrity_interval_s=-1)


def test_the_witness_service_chains_and_checkpoints_every_n_events(busy: Ledger) -> None:
    witness = ChainWitness(busy, ChainWitnessConfig(checkpoint_every=8))
    assert witness.run_once() is None  # the pass at the pool's start waits an interval
    assert busy.integrity.head().events == 0
    report = witness.run_once()
    assert report is not None and report.applied == 21  # a definition and 20 enqueues
    [checkpoint] = busy.integrity.checkpoints()
    assert (checkpoint.events, checkpoint.signature) == (21, None)
    assert witness.run_once() is not None
    # The checkpoint is itself an event: the next pass chains it, and no new one is due.
    assert busy.integrity.head().events == 22
    assert len(busy.integrity.checkpoints()) == 1
    assert busy.integrity.verify().ok


def test_after_a_signed_checkpoint_a_runner_without_the_key_leaves_them(busy: Ledger) -> None:
    key = Ed25519PrivateKey.generate()
    signer = busy.integrity.runner(signing_key=key, checkpoint_every=1)
    unsigned = busy.integrity.runner(checkpoint_every=1)
    signer.catch_up(wait_s=10)
    [first] = busy.integrity.checkpoints()
    assert first.signature is not None
    busy.enqueue("t", {"more": True})
    unsigned.catch_up(wait_s=10)
    assert len(busy.integrity.checkpoints()) == 1  # left to the key's holder
    signer.catch_up(wait_s=10)
    assert [c.signature is not None for c in busy.integrity.checkpoints()] == [True, True]
    assert busy.integrity.verify(public_key=key.public_key()).ok


def test_two_runners_at_once_take_turns_and_never_chain_an_event_twice(busy: Ledger) -> None:
    """Both start together (a barrier); each block is one transaction under the head row's
    lock, so the second finds the first's blocks and goes on after them."""
    runners = [ChainRunner(busy.store, batch=3, checkpoint_every=None) for _ in range(2)]
    barrier = threading.Barrier(2)
    errors: list[BaseException] = []

    def run(runner: ChainRunner) -> None:
        try:
            barrier.wait()
            runner.catch_up(wait_s=10)
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(r,)) for r in runners]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    head = busy.integrity.head()
    assert (head.events, head.unwitnessed) == (21, 0)
    report = busy.integrity.verify()
    assert report.ok and report.checked == 21


def test_a_worker_pools_witness_chains_what_it_ran(db_url: str) -> None:
    """A real pool runs the witness service (its first pass, at start, waits an interval:
    a short-lived pool chains nothing); the service's next pass chains all it ran."""
    import asyncio

    from ledger.runtime.handlers import JobContext, Registry
    from ledger.runtime.pool import WorkerPool

    registry = Registry()

    @registry.handler("t")
    async def handler(ctx: JobContext) -> None:
        return None

    with Ledger.open(db_url, clock=FakeClock()) as ledger:
        ledger.define("t")
        for i in range(5):
            ledger.enqueue("t", {"i": i})
        pool = WorkerPool(ledger, registry, concurrency=2, integrity_interval_s=3600)
        asyncio.run(pool.run_until_idle())
        assert ledger.counts() == {"succeeded": 5}
        assert pool.maintenance_stats["integrity"].runs == 1
        assert ledger.integrity.head().events == 0
        witness = ChainWitness(ledger)
        witness.run_once()
        witness.run_once()  # the next pass, without waiting an interval
        head = ledger.integrity.head()
        assert head.unwitnessed == 0 and head.events == 21  # a definition and 5 x 4
        assert ledger.integrity.verify().ok


def test_an_idle_ledger_does_not_checkpoint_its_own_checkpoints(busy: Ledger) -> None:
    """A checkpoint is an event the next pass chains; it does not count towards the next
    checkpoint, or a ledger at rest would append one per pass forever."""
    runner = busy.integrity.runner(checkpoint_every=1)
    for _ in range(4):
        runner.catch_up(wait_s=10)
    assert len(busy.integrity.checkpoints()) == 1
    busy.enqueue("t", {"more": True})
    runner.catch_up(wait_s=10)
    assert len(busy.integrity.checkpoints()) == 2
