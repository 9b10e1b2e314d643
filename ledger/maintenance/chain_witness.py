"""The chain witness service: extends the history's hash chain on an interval.

One pass is :meth:`projections.chain.ChainRunner.catch_up`: the final events after the
chain's head are hashed into a witness block, and a checkpoint is appended when one is due
(signed when this pool holds the key). Any number of pools may run it: each block is one
transaction under the head row's lock, so they take turns and the second finds nothing. It
runs off the hot path, on the maintenance thread, in one transaction per pass: the writers
never wait for it (decision 41).
"""

from __future__ import annotations

from dataclasses import dataclass

from ledger.api.ledger import Ledger
from ledger.core.limits import check_setting_seconds
from projections.chain import CHECKPOINT_EVERY, ChainRunner
from projections.tracked import CatchUp

DEFAULT_INTERVAL_S = 10.0


@dataclass(frozen=True)
class ChainWitnessConfig:
    """How often the witness runs, how often it checkpoints, and the key it signs with."""

    interval_s: float = DEFAULT_INTERVAL_S
    checkpoint_every: int = CHECKPOINT_EVERY
    signing_key_file: str | None = None

    def __post_init__(self) -> None:
        check_setting_seconds(self.interval_s, "integrity_interval_s")
        if self.checkpoint_every < 1:
            raise ValueError("checkpoint_every must be at least 1")


class ChainWitness:
    """Extends one ledger's hash chain (a maintenance service)."""

    name = "integrity"

    def __init__(self, ledger: Ledger, config: ChainWitnessConfig | None = None) -> None:
        self.config = config or ChainWitnessConfig()
        self._runner: ChainRunner = ledger.integrity.runner(
            signing_key=self.config.signing_key_file,
            checkpoint_every=self.config.checkpoint_every,
        )
        self._read_only = ledger.store.read_only
        self._started = False

    @property
    def interval_s(self) -> float:
        return self.config.interval_s

    def stop(self) -> None:
        """End a pass in progress after its batch (the pool is stopping)."""
        self._runner.stop()

    def run_once(self) -> CatchUp | None:
        """One pass; the first (at the pool's start) does nothing: a pool's start is busy
        with its boot reap and first claims, and a short-lived pool (a burst, a test) need
        not chain at all (measured: ~7% of tests/runtime's time). A long-lived pool chains
        within two intervals of its start."""
        if self._read_only or not self._started:
            self._started = True
            return None
        return self._runner.catch_up()
