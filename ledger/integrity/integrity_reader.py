"""The integrity reads: :class:`IntegrityReader`, what ``reader.integrity`` hands out: the
chain's head and checkpoints, and verification of the history against them
(:mod:`projections.chain_verify`)."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeAlias

import msgspec

from ledger.clock import Clock
from ledger.core.integrity_checkpoints import IntegrityCheckpoint, key_id, short_head
from ledger.store.integrity_tables import chain_head
from ledger.store.store import Store
from ledger.views.stream_events import TailPosition
from projections.chain import read_checkpoints

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    from projections.chain_verify import IntegrityReport


class ChainStatus(msgspec.Struct):
    """The chain's head as ``integrity head`` prints it."""

    started: bool
    start_position: int
    """The events up to this notification id came before the chain (0: it covers them all)."""
    events: int
    position: int
    head: str
    short_head: str
    """What an operator publishes elsewhere (``EVENTS:HEX``): ``integrity verify --expect``
    checks the chain against it."""
    unwitnessed: int
    """Events after the head the follower has not hashed yet."""
    checkpoints: int
    last_checkpoint_events: int | None
    last_checkpoint_key: str | None
    """The key id that signed the last checkpoint (``None``: unsigned, or none)."""


PublicKeyArg: TypeAlias = "Ed25519PublicKey | str | os.PathLike[str] | None"


class IntegrityReader:
    """The chain's head and checkpoints, and :meth:`verify`."""

    def __init__(self, store: Store, clock: Clock) -> None:
        self.store = store
        self.clock = clock

    def head(self) -> ChainStatus:
        """Where the chain is, and how far behind the history."""
        with self.store.read_snapshot() as snapshot:
            head = chain_head(snapshot)
            at = (
                TailPosition() if head is None else TailPosition(head.transaction_id, head.position)
            )
            unwitnessed = snapshot.count_after(at)
        found = read_checkpoints(self.store)
        last: IntegrityCheckpoint | None = found[-1] if found else None
        if head is None:
            return ChainStatus(False, 0, 0, 0, "", "", unwitnessed, 0, None, None)
        return ChainStatus(
            True,
            head.start_position,
            head.events,
            head.position,
            head.chain.hex(),
            short_head(head.events, head.chain),
            unwitnessed,
            len(found),
            None if last is None else last.events,
            None if last is None or last.public_key is None else key_id(last.public_key),
        )

    def checkpoints(self) -> list[IntegrityCheckpoint]:
        """Every checkpoint, oldest first."""
        return read_checkpoints(self.store)

    def verify(
        self,
        *,
        from_position: int | None = None,
        public_key: PublicKeyArg = None,
        expect: str | None = None,
        include_archive: bool = False,
        progress: Callable[[int, int], None] | None = None,
    ) -> IntegrityReport:
        """Recompute the chain over the stored events and check the witness, every checkpoint
        and signature (under ``public_key``: a key, or a PEM file's path), and the published
        head ``expect`` (``EVENTS:HEX``). ``include_archive``: this reader reads the archive
        too (``Reader.open_with_archive``)."""
        from projections.chain_verify import verify_chain  # loads OpenSSL's bindings

        trusted: Ed25519PublicKey | None
        if isinstance(public_key, str | os.PathLike):
            from ledger.integrity.keys import load_public_key

            trusted = load_public_key(public_key)
        else:
            trusted = public_key
        return verify_chain(
            self.store,
            from_position=from_position,
            public_key=trusted,
            expect=expect,
            include_archive=include_archive,
            progress=progress,
        )
