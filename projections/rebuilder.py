"""Rebuild, verify and status of the inline views: the shell around the pure replay.

- :meth:`Rebuilder.verify` replays the whole history in one read snapshot and diffs each view's
  live rows against the replay's (:mod:`ledger.views.diff`).
- :meth:`Rebuilder.rebuild` replays from position 0 in a snapshot, bulk-loads shadow tables
  in chunks (one short transaction each, so writers keep going; largest table first, each
  one's indexes built on another connection while the next loads, where the backend allows),
  catches up without locks, then — in one transaction holding the events-table lock, so no
  event can be appended meanwhile — applies the last events, swaps the shadows in and
  records the versions. Each catch-up reads what its snapshot sees that the previous read's
  did not (:meth:`~ledger.store.reads.ReadSnapshot.events_since`), not the events after
  the highest id read: ids commit out of order, and this keeps each stream in version order.
- :meth:`Rebuilder.status` reports each projection's code and recorded schema versions.

Verify and rebuild run with Python's cyclic garbage collector paused
(:func:`_collector_paused`).
"""

from __future__ import annotations

import gc
import logging
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from itertools import islice

import msgspec

from ledger.core.errors import DatabaseBusyError
from ledger.store.reads import ReadSnapshot
from ledger.store.schema import MIGRATION_WAIT_S
from ledger.store.store import Store
from ledger.store.views import ViewTables
from ledger.views.catalog import (
    AUDIT,
    Projection,
    by_name,
    projections,
    recorded_version,
    resolve,
    stale,
    tracked,
    version_key,
)
from ledger.views.diff import VerifyReport, diff_view
from ledger.views.rows_from_history import Replay, Row, TailPosition
from projections.frontier import wait_final

log = logging.getLogger("jobledger.projections")

Progress = Callable[[str, int, int], None]
"""``progress(phase, done, total)``: phases ``replay``, ``load <name>``, ``catch-up``, ``swap``,
``verify``. It is called inside transactions (the ``swap`` one holds the events-table lock):
it must not wait for other writers."""

BATCH = 20_000
"""Events read per query."""
CHUNK = 5_000
"""Rows written per statement (and per transaction while loading)."""
CATCH_UP_LOCKED_BELOW = 1_000
"""Catch up without locks until fewer events than this remain, then lock and swap."""
FINAL_WAIT_S = 10.0
"""How long a rebuild of a tracked view waits for what has committed to become final."""
CATCH_UP_ROUNDS = 10
"""…or until this many unlocked rounds have run, if writers keep up with the catch-up."""


class ProjectionStatus(msgspec.Struct, frozen=True):
    """One projection's state: versions, mode, position and lag."""

    name: str
    mode: str
    tables: list[str]
    code_version: int
    recorded_version: int | None
    stale: bool
    position: int
    lag: int


class RebuildReport(msgspec.Struct, frozen=True):
    """What a rebuild did."""

    names: list[str]
    position: int
    events: int
    rows: dict[str, int]
    seconds: float
    swap_attempts: int


def _no_progress(phase: str, done: int, total: int) -> None:
    """Report nothing."""


def _chunks(rows: Iterator[Row], size: int) -> Iterator[list[Row]]:
    while chunk := list(islice(rows, size)):
        yield chunk


@contextmanager
def _collector_paused() -> Iterator[None]:
    """Pause Python's cyclic garbage collector (process-wide) for a replay.

    A replay allocates millions of objects it keeps (states, rows), and each allocation
    burst triggers a collection that traverses all of them again: with the collector on, a
    1,000,000-event replay spent more than half its time there. What it builds has no
    cycles (reference counting frees it all), so nothing waits for the collector meanwhile
    but other threads' cyclic garbage, collected once this ends."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


class Rebuilder:
    """Rebuild, verify and report the inline projections of one store."""

    def __init__(
        self,
        store: Store,
        *,
        progress: Progress | None = None,
        batch: int = BATCH,
        chunk: int = CHUNK,
        lock_timeout_s: float = 0.5,
        swap_attempts: int = 50,
        catch_up_locked_below: int = CATCH_UP_LOCKED_BELOW,
        wait_s: float = MIGRATION_WAIT_S,
    ) -> None:
        self.store = store
        self.progress = progress or _no_progress
        self.batch = batch
        self.chunk = chunk
        self.lock_timeout_s = lock_timeout_s
        self.swap_attempts = swap_attempts
        self.catch_up_locked_below = catch_up_locked_below
        self.wait_s = wait_s
        """How long a rebuild waits for another schema change (a migrate, another rebuild) of
        the database to end: two at once would share the shadow tables."""

    # --- reading history --------------------------------------------------------------------

    def _replay(self, replay: Replay, tables: ReadSnapshot, phase: str) -> str:
        """Fold every event ``tables`` sees (``replay`` is fresh); its snapshot's mark."""
        mark = tables.snapshot_mark()
        total = tables.head()
        for events in tables.pages(0, total, self.batch):
            replay.apply(events)
            self.progress(phase, min(replay.position, total), total)
        return mark

    def _replay_since(self, replay: Replay, tables: ReadSnapshot, mark: str, phase: str) -> str:
        """Fold every event ``tables`` sees that the snapshot of ``mark`` did not; its mark."""
        since = tables.snapshot_mark()
        total = tables.count_since(mark)
        done = 0
        for events in tables.events_since(mark, self.batch):
            replay.apply(events)
            done += len(events)
            self.progress(phase, min(done, total), total)
        return since

    # --- verify -----------------------------------------------------------------------------

    def verify(self, names: Sequence[str] | None = None) -> VerifyReport:
        """Replay the history and diff the named views (all by default) against it, all in
        one consistent read snapshot. A tracked view is compared with the history up to its
        recorded position (the replay stops there first), the inline ones with all of it."""
        with _collector_paused():
            return self._verify(resolve(names))

    def _verify(self, projections: list[Projection]) -> VerifyReport:
        with self.store.read_snapshot() as tables:
            # A tracked view (only audit) holds the events up to its tail position: the
            # replay keeps its rows for those only, and folds everything for the inline views.
            upto = None
            if tracked(projections):
                upto = tables.tail_positions().get(AUDIT.name, TailPosition())
            replay = Replay(audit=upto is not None, dirty=False, audit_upto=upto)
            head = tables.head()
            for events in tables.pages(0, head, self.batch, transactions=upto is not None):
                replay.apply(events)
                self.progress("replay", min(replay.position, head), head)
            views = []
            for projection in projections:
                views.append(diff_view(projection, replay, tables.live_rows(projection)))
                self.progress("verify", len(views), len(projections))
        return VerifyReport(position=replay.position, events=replay.applied, views=views)

    # --- rebuild ----------------------------------------------------------------------------

    def rebuild(self, names: Sequence[str] | None = None) -> RebuildReport:
        """Rebuild the named views (all by default) from position 0 and swap them in, holding
        the migration lock (:meth:`~ledger.store.store.Store.schema_lock`)."""
        projections = resolve(names)
        with self.store.schema_lock(self.wait_s), _collector_paused():
            return self._rebuild(projections)

    def _rebuild(self, projections: list[Projection]) -> RebuildReport:
        started = time.perf_counter()
        # The first pass writes every row: no need to note which ones each event touched.
        replay = Replay(audit=bool(tracked(projections)), dirty=False)
        with self.store.read_snapshot() as tables:
            mark = self._replay(replay, tables, "replay")
        replay.track_dirty = True
        with ThreadPoolExecutor(1, thread_name_prefix="jl-index") as indexer:
            # Where the backend allows concurrent writers, a shadow's indexes are built (by
            # the server) while the next shadow loads (mostly work of this process): the
            # largest first, so that only the smaller ones' builds are left to wait for.
            largest_first = sorted(projections, key=lambda p: -replay.count(p.name))
            builds = [self._load(p, replay, indexer) for p in largest_first]
            for build in builds:
                if build is not None:
                    build.result()
        rows = {p.name: replay.count(p.name) for p in projections}
        # Catch up without locks while much is left, so the locked step stays short.
        for _ in range(CATCH_UP_ROUNDS):
            with self.store.read_snapshot() as tables:
                if tables.count_since(mark) < self.catch_up_locked_below:
                    break
                mark = self._replay_since(replay, tables, mark, "catch-up")
            with self.store.view_tables() as tables:
                self._write_dirty(tables, projections, replay)
        if tracked(projections):
            # A tracked view's recorded position is the last final event's: let what has
            # committed become final first, so that it holds all of it (the rest is left to
            # its runner: see _trim_to_tail).
            wait_final(self.store, FINAL_WAIT_S)
        attempts, left_out = self._swap(projections, replay, mark)
        seconds = time.perf_counter() - started
        for p in projections:
            rows[p.name] = replay.count(p.name) - left_out.get(p.name, 0)
        log.info("rebuilt %s to position %d", ", ".join(rows), replay.position)
        return RebuildReport(
            names=[p.name for p in projections],
            position=replay.position,
            events=replay.applied,
            rows=rows,
            seconds=seconds,
            swap_attempts=attempts,
        )

    def _load(
        self, projection: Projection, replay: Replay, indexer: ThreadPoolExecutor
    ) -> Future[None] | None:
        """Bulk-load the replay's rows into a fresh shadow table, a chunk per transaction,
        then index it: on ``indexer`` if the backend takes concurrent writers (the future
        returned), else here."""
        with self.store.view_tables() as tables:
            tables.shadows.create(projection)
            concurrent = tables.shadows.concurrent_writers
        total = replay.count(projection.name)
        done = 0
        for chunk in _chunks(replay.rows(projection.name), self.chunk):
            with self.store.view_tables() as tables:
                tables.shadows.insert(projection, chunk)
            done += len(chunk)
            self.progress(f"load {projection.name}", done, total)
        if concurrent:
            return indexer.submit(self._index, projection)
        self._index(projection)
        return None

    def _index(self, projection: Projection) -> None:
        with self.store.view_tables() as tables:
            tables.shadows.index(projection)

    def _write_dirty(
        self, tables: ViewTables, projections: Sequence[Projection], replay: Replay
    ) -> None:
        """Bring the shadows up to the replay: rewrite every row touched since the last call."""
        for name, projection in by_name().items():
            dirty = sorted(replay.take_dirty(name), key=str)
            if projection not in projections or not dirty:
                continue
            for start in range(0, len(dirty), self.chunk):
                keys = dirty[start : start + self.chunk]
                tables.shadows.delete(projection, keys)
                present = [row for key in keys if (row := replay.row(name, key)) is not None]
                tables.shadows.insert(projection, present)

    def _swap(
        self, projections: Sequence[Projection], replay: Replay, mark: str
    ) -> tuple[int, dict[str, int]]:
        """Lock, apply the last events, swap and record versions: one transaction. Returns
        the attempts it took and the rows left out of each tracked view for its runner."""
        applied = replay.applied
        for attempt in range(1, self.swap_attempts + 1):
            try:
                left_out = {}
                with self.store.view_tables() as tables:
                    tables.shadows.lock_for_swap(projections, self.lock_timeout_s)
                    # From here nothing can be appended (and what was, has committed):
                    # replay to the true head.
                    self._replay_since(replay, tables, mark, "swap")
                    self._write_dirty(tables, projections, replay)
                    for projection in projections:
                        if projection.mode == "tracked":
                            left_out[projection.name] = self._trim_to_tail(
                                tables, projection, replay
                            )
                        tables.shadows.swap(projection)
                        tables.set_meta(version_key(projection.name), str(projection.version))
                return attempt, left_out
            except DatabaseBusyError:
                # The locks timed out before anything was replayed: retry. (Anything later
                # would leave the replay ahead of the shadows: give up.)
                if attempt == self.swap_attempts or replay.applied != applied:
                    raise
                time.sleep(min(0.05 * attempt, 1.0))
        raise AssertionError("unreachable")

    def _trim_to_tail(self, tables: ViewTables, projection: Projection, replay: Replay) -> int:
        """Record a tracked view's tail position with its rows: the last final event's.
        Its runner reads on from there, so the rows of the events after it (committed, but
        by transactions newer than one still in flight, which may yet append before them)
        are left for the runner to write."""
        tables.prime_frontier()
        at = tables.tail_head()
        later = [(position,) for position in tables.positions_after(at)]
        for start in range(0, len(later), self.chunk):
            tables.shadows.delete(projection, later[start : start + self.chunk])
        tables.set_tracking(projection.name, at)
        return sum(1 for key in later if replay.row(projection.name, key) is not None)

    # --- status -----------------------------------------------------------------------------

    def status(self) -> list[ProjectionStatus]:
        """Each projection's versions (code and recorded), position and lag."""
        with self.store.read_snapshot() as tables:
            meta = tables.meta()
            head = tables.head()
            at = tables.tail_positions()
            lags = {name: tables.count_after(position) for name, position in at.items()}
        statuses = []
        stale_projections = stale(meta)
        for p in projections():
            recorded = recorded_version(meta, p)
            # inline: written with the events; tracked: where its runner got to
            tracked = p.mode == "tracked"
            position = at.get(p.name, TailPosition()).position if tracked else head
            statuses.append(
                ProjectionStatus(
                    name=p.name,
                    mode=p.mode,
                    tables=[p.table],
                    code_version=p.version,
                    recorded_version=recorded,
                    stale=p in stale_projections,
                    position=position,
                    lag=lags.get(p.name, head) if tracked else 0,
                )
            )
        return statuses

    def refresh(self) -> list[str]:
        """Record the version of each projection that has none (its table was built by this
        schema), and rebuild those whose recorded version differs from the code's. Returns
        the names rebuilt."""
        stale = [s.name for s in self.status() if s.stale]
        with self.store.view_tables() as tables:
            meta = tables.meta()
            for p in projections():
                if version_key(p.name) not in meta:
                    tables.set_meta(version_key(p.name), str(p.version))
        if stale:
            log.warning("rebuilding stale projections: %s", ", ".join(stale))
            self.rebuild(stale)
        return stale
