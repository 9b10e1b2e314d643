"""A unit of work's reads of jobs: those it may change, remembered, and what a claim counts.

:class:`JobReads` is mixed into :class:`~ledger.store.unit_of_work.UnitOfWork`, beside
:class:`~ledger.store.run_reads.RunReads` and :class:`~ledger.store.state_reads.StateReads`.
Every job it returns is remembered with its queue position (:class:`LoadedJob`), most of them
locked until commit: the append that follows folds onto what was read here, so a job it
changes must have been read first, unless its first event is ``job_enqueued``. A claim reads
the due jobs (:meth:`JobReads.claimable`), then what its limits count: the live leases under
the limited keys' locks (:mod:`ledger.jobs.claim_limits`), the rate buckets under the rate
types' locks (:mod:`ledger.jobs.claim_rates`).
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any, NamedTuple
from uuid import UUID

from ledger.core.codec import EventCodec
from ledger.core.state import JobState
from ledger.core.times import to_us
from ledger.store.ids import IdAdapter
from ledger.store.state_reads import AnyKind
from ledger.store.trailing_events import with_trailing
from ledger.views.job_types import KIND as DEFINITIONS
from ledger.views.job_types import decode_definition_row
from ledger.views.queue import decode_state
from ledger.views.rate_buckets import RateBucket, bucket_of_row


class LoadedJob(NamedTuple):
    """A job read in a unit of work: its state and its queue position (first event's id)."""

    state: JobState
    enqueue_seq: int


class JobReads:
    """The job half of a unit of work's reads (see the module docstring)."""

    _ids: IdAdapter
    _jobs: dict[UUID, LoadedJob]
    _known: dict[AnyKind, dict[Any, Any]]
    rate_limited: set[UUID]

    @abstractmethod
    def _rows(self, query: str, params: dict[str, Any]) -> Sequence[Any]: ...

    _codec: EventCodec
    _rows_may_lag: bool = False
    """Whether a leased job's row may be behind its stream (:mod:`ledger.views.queue_lag`)."""

    def _fetch_jobs(self, query: str, params: dict[str, Any]) -> list[LoadedJob]:
        """Run a named queue query returning (job_id, enqueue_seq, state) rows; each state
        caught up with the events its row has not folded yet, read after the rows (and
        their locks), so that a decision sees every event before it appends."""
        rows = self._rows(query, params)
        states = [decode_state(row["state"]) for row in rows]
        if self._rows_may_lag:
            states = with_trailing(self._rows, self._codec, self._ids, states)
        return [
            LoadedJob(state, row["enqueue_seq"]) for state, row in zip(states, rows, strict=True)
        ]

    def _remember(self, loaded: list[LoadedJob]) -> list[JobState]:
        for item in loaded:
            self._jobs[item.state.job_id] = item
        return [item.state for item in loaded]

    def lock_jobs(self, job_ids: Sequence[UUID]) -> dict[UUID, JobState]:
        """The current states of ``job_ids`` that exist, locked until commit."""
        if not job_ids:
            return {}
        keys = self._ids.keys(set(job_ids))
        states = self._remember(self._fetch_jobs("queue_lock", {"job_ids": keys}))
        return {state.job_id: state for state in states}

    def claimable(
        self,
        now: datetime,
        types: Sequence[str] | None,
        limit: int,
        queues: Sequence[str] | None = None,
        *,
        full_types: Iterable[str] = (),
        full_orgs: Iterable[tuple[str, str]] = (),
        taken: Iterable[UUID] = (),
    ) -> list[JobState]:
        """Due pending jobs in fair claim order (round-robin across orgs), up to ``limit``,
        locked (others' locks skipped); of ``types`` and in ``queues`` only, where given (a
        job without a queue is in ``DEFAULT_QUEUE``). Left out: jobs of ``full_types``, of
        the ``full_orgs`` (type, org) pairs (``""`` is no org) and ``taken``.

        The rows carry their types' definitions: :meth:`states` of the claimed jobs' types
        then asks nothing more of the database."""
        params: dict[str, Any] = {
            "now": to_us(now),
            "limit": limit,
            "full_types": self._ids.values(sorted(full_types)),
            "full_orgs": self._ids.values(sorted(f"{t}\x1f{o}" for t, o in full_orgs)),
            "taken": self._ids.keys(taken),
        }
        query = "queue_claim"
        if types is not None:
            params["types"] = self._ids.values(types)
            query += "_types"
        if queues is not None:
            params["queues"] = self._ids.values(queues)
            query += "_queues"
        loaded: list[LoadedJob] = []
        definitions = self._known.setdefault(DEFINITIONS, {})
        for row in self._rows(query, params):
            state = decode_state(row["state"])
            loaded.append(LoadedJob(state, row["enqueue_seq"]))
            # The queries skip paused queues and rate keys without a token; a limited type's
            # jobs still need counting against their bucket (ledger.jobs.claim_rates). Kept
            # across the claim's asks (the concurrency step may ask again).
            if row["rate_limited"]:
                self.rate_limited.add(state.job_id)
            blob = row["definition"]
            if blob is not None and state.job_type not in definitions:
                definitions[state.job_type] = decode_definition_row(blob, row["definition_version"])
        return self._remember(loaded)

    def live_leases(self, job_types: Sequence[str]) -> dict[tuple[str, str], int]:
        """Live leases (status ``leased``) per (type, org) of ``job_types``; ``""`` is no
        org. Counted in this transaction, after :meth:`lock_limit_keys`."""
        if not job_types:
            return {}
        rows = self._rows("queue_live_leases", {"types": self._ids.values(job_types)})
        return {(row["job_type"], row["org"]): row["n"] for row in rows}

    def lock_limit_keys(self, keys: Sequence[str]) -> None:
        """Serialise, until commit, the claims of these limited keys (sorted by the caller,
        so two claims never wait for each other's). SQLite: nothing to do, its writers are
        already serialised by BEGIN IMMEDIATE."""

    def lock_rate_types(self, job_types: Sequence[str]) -> None:
        """Hold off other claims of ``job_types`` until commit, before reading their buckets
        (SQLite: nothing to do, ``BEGIN IMMEDIATE`` already serialises writers)."""

    def rate_buckets(self, job_types: Sequence[str]) -> list[RateBucket]:
        """The rate buckets of ``job_types`` (every key of each)."""
        params = {"job_types": self._ids.values(job_types)}
        return [bucket_of_row(row) for row in self._rows("rate_buckets_of_types", params)]

    def loaded(self, job_id: UUID) -> JobState | None:
        """A job's state as this unit of work last read or folded it."""
        return self._loaded_state(job_id)

    def _loaded_state(self, job_id: UUID) -> JobState | None:
        loaded = self._jobs.get(job_id)
        return loaded.state if loaded is not None else None

    def expired_leases(self, now: datetime, limit: int) -> list[JobState]:
        """Leased jobs whose lease ended strictly before ``now``, oldest first, locked
        (rows locked by another transaction skipped). A deferred reap pushed its job's lease
        out (``job_reap_deferred``), so it is left out until that lease ends."""
        params = {"now": to_us(now), "limit": limit}
        return self._remember(self._fetch_jobs("queue_expired_leases", params))

    def leased_by_prefix(self, prefix: str) -> list[JobState]:
        """Leased jobs whose worker id starts with ``prefix``, locked."""
        return self._remember(self._fetch_jobs("queue_leased_by_prefix", {"prefix": prefix}))

    def find_idempotent(self, job_type: str, org: str | None, key: str) -> JobState | None:
        params = {"job_type": job_type, "org": org or "", "idempotency_key": key}
        found = self._remember(self._fetch_jobs("queue_find_idempotent", params))
        return found[0] if found else None

    def find_live_subject(self, source_id: str, uri: str) -> JobState | None:
        params = {"source_id": source_id, "uri": uri}
        found = self._remember(self._fetch_jobs("queue_find_live_subject", params))
        return found[0] if found else None
