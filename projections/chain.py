"""The history's hash chain, extended by a follower: the witness of every event's digest.

A :class:`ChainRunner` reads the next events of the final prefix after the chain's head, in
the order tailing readers rely on (``events_tail``: see docs/architecture.md, "The order
tailing readers rely on"), hashes each as stored (:func:`ledger.core.integrity.event_digest`),
folds the digests into the chain, and records them as one witness block with the new head,
in one transaction that holds the head row's lock: blocks and head commit together or not
at all, and two runners take turns (the second finds nothing left). The writers are not
touched: the chain costs them nothing (decision 41).

Every ``checkpoint_every`` events it appends an :class:`IntegrityCheckpoint` to the
checkpoints' stream, signed when it holds a key. Once a signed checkpoint exists, runners
without a key leave checkpoints to the one that holds it, so an unsigned checkpoint never
follows a signed one.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ledger.clock import Clock, SystemClock
from ledger.core.codec import Record
from ledger.core.integrity import ChainHead, WitnessBlock, chain_rows
from ledger.core.integrity_checkpoints import INTEGRITY_STREAM_ID, IntegrityCheckpoint, signed
from ledger.store.integrity_tables import chain_head, extend_chain, lock_chain_head, stored_tail
from ledger.store.reads import StoredRow, decode_records
from ledger.store.store import Store
from ledger.views.kinds import INTEGRITY
from ledger.views.stream_events import TailPosition
from projections.frontier import wait_final
from projections.tracked import CatchUp

if TYPE_CHECKING:  # a pool without a key never loads OpenSSL's bindings for it
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

BATCH = 5_000
"""Events hashed per transaction (one witness block)."""
CHECKPOINT_EVERY = 10_000
"""Events between two checkpoints, by default."""
NAME = "integrity"

log = logging.getLogger("jobledger.integrity")


@dataclass
class LastCheckpoint:
    """What the runner knows of the checkpoints' stream: its version and the newest one."""

    version: int
    checkpoint: IntegrityCheckpoint | None


def checkpoints(records: Sequence[Record]) -> list[IntegrityCheckpoint]:
    return [r.event for r in records if isinstance(r.event, IntegrityCheckpoint)]


def read_checkpoints(store: Store) -> list[IntegrityCheckpoint]:
    """Every checkpoint, oldest first."""
    with store.read_snapshot() as snapshot:
        rows = snapshot.fetch(
            "events_of_job_after", {"ids": store.ids.keys([INTEGRITY_STREAM_ID]), "after": 0}
        )
        return checkpoints(decode_records(store.codec, store.ids, rows, INTEGRITY_STREAM_ID))


def next_block(head: ChainHead, events: Sequence[StoredRow]) -> tuple[WitnessBlock, ChainHead]:
    """The block that witnesses ``events`` (the next after ``head``, in tail order, each with
    its transaction id last) and the chain's head after it. Pure."""
    chained = chain_rows(head.chain, events)
    last = events[-1]
    last_transaction, last_position = int(last[-1]), int(last[0])
    block = WitnessBlock(
        head.blocks,
        head.events,
        last_transaction,
        last_position,
        head.chain,
        chained.chain,
        chained.entries,
    )
    new_head = head._replace(
        transaction_id=last_transaction,
        position=last_position,
        events=head.events + chained.events,
        blocks=head.blocks + 1,
        chain=chained.chain,
    )
    return block, new_head


class ChainRunner:
    """Extend one store's hash chain to the end of the final prefix, checkpointing it."""

    name = NAME

    def __init__(
        self,
        store: Store,
        *,
        batch: int = BATCH,
        checkpoint_every: int | None = CHECKPOINT_EVERY,
        signing_key: Ed25519PrivateKey | None = None,
        clock: Clock | None = None,
    ) -> None:
        if checkpoint_every is not None and checkpoint_every < 1:
            raise ValueError("checkpoint_every must be at least 1")
        self.store = store
        self.batch = batch
        self.checkpoint_every = checkpoint_every
        self.signing_key = signing_key
        self.clock = clock or SystemClock()
        self._last: LastCheckpoint | None = None
        self._stopping = threading.Event()

    def stop(self) -> None:
        """End a catch-up in progress after its batch (safe from any thread)."""
        self._stopping.set()

    def head(self) -> ChainHead | None:
        with self.store.read_snapshot() as snapshot:
            return chain_head(snapshot)

    def run_once(self, limit: int | None = None) -> int:
        """Hash the next batch (up to ``limit`` events) into one block; how many."""
        return self._run_batch(limit)[0]

    def _run_batch(self, limit: int | None = None) -> tuple[int, int]:
        """One block: how many events it chained, and the head's position after it."""
        with self.store.view_tables() as tables:
            head = lock_chain_head(tables)
            if head is None:
                return 0, 0
            tables.prime_frontier()
            at = TailPosition(head.transaction_id, head.position)
            events = stored_tail(tables, at, limit or self.batch)
            if not events:
                return 0, head.position
            block, new_head = next_block(head, events)
            extend_chain(tables, block, new_head)
            return len(events), new_head.position

    def catch_up(self, *, wait_s: float = 0.0) -> CatchUp:
        """Extend the chain until no final event is left after its head, then checkpoint it if
        one is due.

        Events of a transaction are final once every older transaction that may append here
        has ended: without ``wait_s`` those not final yet are left for the next pass; with
        it, this goes on (polling, up to ``wait_s`` seconds) until every event committed
        before the call is chained (what a command that says "now" needs)."""
        if wait_s > 0:
            wait_final(self.store, wait_s)
        report = self._catch_up_final()
        if self.checkpoint_every is not None:
            # Even when this runner chained nothing: another (without the key) may have.
            head = self.head()
            if head is not None:
                self.checkpoint_if_due(head)
        return report

    def _catch_up_final(self) -> CatchUp:
        applied = batches = 0
        with self.store.read_snapshot() as snapshot:
            # Nothing new: answer from a read, without the write lock (asked on every wake-up;
            # on SQLite the write lock is the whole database's).
            snapshot.prime_frontier()
            head = chain_head(snapshot)
            if head is None:
                return CatchUp(NAME, 0, 0, 0)
            position = head.position
            fresh = stored_tail(snapshot, TailPosition(head.transaction_id, head.position), 1)
        while fresh and not self._stopping.is_set():
            done, position = self._run_batch()
            if not done:
                break
            applied += done
            batches += 1
        return CatchUp(NAME, applied, batches, position)

    # --- checkpoints ------------------------------------------------------------------------

    def _last_checkpoint(self) -> LastCheckpoint:
        if self._last is None:
            found = read_checkpoints(self.store)
            self._last = LastCheckpoint(len(found), found[-1] if found else None)
        return self._last

    def checkpoint_if_due(self, head: ChainHead) -> IntegrityCheckpoint | None:
        """Append a checkpoint of ``head`` if ``checkpoint_every`` events have been chained
        since the last one (and this runner may: see the module docstring)."""
        if self.checkpoint_every is None or head.events == 0:
            return None
        last = self._last_checkpoint()
        # Not counting the last checkpoint's own event (chained after it): an idle ledger
        # would otherwise checkpoint its checkpoints forever at --checkpoint-every 1.
        since = head.events - (0 if last.checkpoint is None else last.checkpoint.events + 1)
        if since < self.checkpoint_every:
            return None
        return self.checkpoint(head)

    def checkpoint(self, head: ChainHead | None = None) -> IntegrityCheckpoint | None:
        """Append a checkpoint of ``head`` (the chain's current head if not given) now;
        ``None`` if the chain has no events yet, another runner checkpointed meanwhile, or
        the last checkpoint is signed and this runner holds no key."""
        head = head or self.head()
        if head is None or head.events == 0:
            return None
        last = self._last_checkpoint()
        if last.checkpoint is not None:
            if last.checkpoint.events >= head.events:
                return None
            if last.checkpoint.signature is not None and self.signing_key is None:
                return None  # the key's holder checkpoints from now on
        public_key, signature = signed(self.signing_key, head.events, head.position, head.chain)
        event = IntegrityCheckpoint(
            at=self.clock.now(),
            events=head.events,
            position=head.position,
            transaction_id=head.transaction_id,
            head=head.chain,
            public_key=public_key,
            signature=signature,
        )
        with self.store.unit_of_work() as uow:
            uow.serialise_appends()  # the stream's version is read, then appended after
            version = uow.state(INTEGRITY, INTEGRITY_STREAM_ID)
            if (0 if version is None else version.version) != last.version:
                self._last = None  # another runner checkpointed: look again next time
                return None
            uow.append([INTEGRITY.change(INTEGRITY_STREAM_ID, [event])])
        self._last = LastCheckpoint(last.version + 1, event)
        log.info("integrity checkpoint at %d events (position %d)", head.events, head.position)
        return event
