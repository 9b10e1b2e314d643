"""The integrity commands: :class:`IntegrityCommands`, what ``ledger.integrity`` hands out:
the reads of :class:`~ledger.integrity.integrity_reader.IntegrityReader` plus extending the
chain (:class:`projections.chain.ChainRunner`) and checkpointing it now."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, TypeAlias

from ledger.core.integrity_checkpoints import IntegrityCheckpoint
from ledger.integrity.integrity_reader import IntegrityReader
from ledger.jobs.binding import LedgerBinding
from projections.chain import CHECKPOINT_EVERY, ChainRunner
from projections.tracked import CatchUp

if TYPE_CHECKING:  # loaded only where a key is used: a keyless pool never loads OpenSSL's
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

CATCH_UP_WAIT_S = 10.0
"""How long an explicit catch-up waits for older transactions still in flight."""

SigningKeyArg: TypeAlias = "Ed25519PrivateKey | str | os.PathLike[str] | None"


class IntegrityCommands(IntegrityReader):
    """The integrity reads and commands of one ledger."""

    def __init__(self, bound: LedgerBinding) -> None:
        super().__init__(bound.store, bound.clock)

    def runner(
        self, *, signing_key: SigningKeyArg = None, checkpoint_every: int | None = CHECKPOINT_EVERY
    ) -> ChainRunner:
        """A runner that extends this ledger's chain (what ``integrity follow`` and the pools'
        witness service run)."""
        key: Ed25519PrivateKey | None
        if isinstance(signing_key, str | os.PathLike):
            from ledger.integrity.keys import load_signing_key

            key = load_signing_key(signing_key)
        else:
            key = signing_key
        return ChainRunner(
            self.store, checkpoint_every=checkpoint_every, signing_key=key, clock=self.clock
        )

    def catch_up(
        self,
        *,
        signing_key: SigningKeyArg = None,
        checkpoint_every: int | None = CHECKPOINT_EVERY,
        wait_s: float = CATCH_UP_WAIT_S,
    ) -> CatchUp:
        """Hash every event committed before the call into the chain (waiting up to
        ``wait_s`` for older transactions still in flight), then checkpoint if one is due."""
        runner = self.runner(signing_key=signing_key, checkpoint_every=checkpoint_every)
        return runner.catch_up(wait_s=wait_s)

    def checkpoint(
        self, *, signing_key: SigningKeyArg = None, wait_s: float = CATCH_UP_WAIT_S
    ) -> IntegrityCheckpoint | None:
        """Catch the chain up (as :meth:`catch_up`) and checkpoint its head now (signed with
        ``signing_key``); ``None`` when there is nothing new to checkpoint, or the last
        checkpoint is signed and no key was given."""
        runner = self.runner(signing_key=signing_key, checkpoint_every=None)
        runner.catch_up(wait_s=wait_s)
        return runner.checkpoint()
