"""The unit of work: one transaction that folds, appends and projects.

A :class:`UnitOfWork` reads (and on PostgreSQL locks) the jobs it will change, and
:meth:`UnitOfWork.append` then does the only kind of write there is: it folds the new events
onto the loaded states (:class:`~ledger.store.fold.AppendFold`, the one ``evolve``), runs the
store's policies, appends the events through the eventsourcing recorder, and writes the view
rows the fold produced, all on the same cursor. No view row changes without the event that
explains it.

Backends (:mod:`ledger.store.sqlite`, :mod:`ledger.store.postgres`) supply the SQL and the
cursor, and the store's :class:`~ledger.store.ids.IdAdapter` spells ids and lists; nothing here
knows which database it talks to.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from datetime import datetime
from typing import Any, NamedTuple
from uuid import UUID

from ledger.core.codec import EventCodec, Record
from ledger.core.events import (
    Event,
    JobEvent,
)
from ledger.core.policy import Policy, RunEvents, trigger_types
from ledger.core.queues import QueueState
from ledger.core.schedules.state import ScheduleState
from ledger.core.source_polls.state import SourcePollState
from ledger.core.state import DefinitionState, JobState
from ledger.core.times import to_us
from ledger.core.tokens import TokenState
from ledger.core.workflows.state import RunState
from ledger.store.fold import AppendFold
from ledger.store.ids import IdAdapter
from ledger.store.policies import follow_policies
from ledger.store.run_reads import LoadedRun, RunReads
from ledger.store.streams import decode_definition_row
from projections.rules.definitions import definition_row
from projections.rules.queue import decode_state, queue_update_row, queue_values
from projections.rules.queue_states import queue_state_of_row, queue_state_row
from projections.rules.rate_buckets import RateBucket, bucket_of_row
from projections.rules.schedules import schedule_of_row, schedule_row
from projections.rules.source_polls import source_poll_of_row, source_poll_row
from projections.rules.tokens import token_of_row, token_row
from projections.rules.workflows import run_row, step_row
from projections.rules.writes import ViewWrite


class EventRow(NamedTuple):
    """One event to append, as the events table stores it: the fields of eventsourcing's
    ``StoredEvent``, read the same way, but a tuple (a frozen dataclass's ``__init__`` cost
    twice the event's encoding, and a COPY sends a tuple as it is)."""

    originator_id: UUID
    originator_version: int
    topic: str
    state: bytes


class LoadedJob(NamedTuple):
    """A job read in a unit of work: its state and its queue position (first event's id)."""

    state: JobState
    enqueue_seq: int


class UnitOfWork(RunReads, ABC):
    """One transaction: read what will change, decide elsewhere, then :meth:`append`."""

    policies: tuple[Policy, ...] = ()
    """The store's policies (:mod:`ledger.store.policies`), set by :meth:`Store.unit_of_work`."""

    def __init__(self, codec: EventCodec, ids: IdAdapter) -> None:
        self._codec = codec
        self._ids = ids
        self._jobs: dict[UUID, LoadedJob] = {}
        self._definitions: dict[str, DefinitionState] = {}
        self._runs: dict[UUID, LoadedRun] = {}
        self._run_locks: set[UUID] = set()
        self.jobs_became_available = False
        self.leased_jobs_cancelled = False
        self.rate_limited: set[UUID] = set()
        """The jobs the last :meth:`claimable` found whose type is rate limited."""

    # --- backend hooks ---------------------------------------------------------------------

    @abstractmethod
    def _rows(self, query: str, params: dict[str, Any]) -> Sequence[Any]:
        """Run a named query on this transaction's cursor; rows indexable by column name."""

    def _fetch_jobs(self, query: str, params: dict[str, Any]) -> list[LoadedJob]:
        """Run a named queue query returning (job_id, enqueue_seq, state) rows."""
        return [
            LoadedJob(decode_state(row["state"]), row["enqueue_seq"])
            for row in self._rows(query, params)
        ]

    def _fetch_definitions(self, job_types: Sequence[str]) -> list[DefinitionState]:
        params = {"job_types": self._ids.values(job_types)}
        return [
            decode_definition_row(row["state"], row["stream_version"])
            for row in self._rows("definitions_get", params)
        ]

    @abstractmethod
    def _insert_stored_events(
        self, stored: list[EventRow], *, positions_needed: bool
    ) -> Sequence[int] | None:
        """Append through the recorder; with ``positions_needed``, return the notification
        ids in order (a backend may skip fetching them otherwise)."""

    def _write_phase(self, new_jobs: int) -> AbstractContextManager[None]:
        """Around an append's writes of ``new_jobs`` new jobs (and their events): a backend
        may batch their round trips, or bulk-load a large batch."""
        return nullcontext()

    @abstractmethod
    def _write_queue(self, inserts: list[tuple[Any, ...]], updates: list[dict[str, Any]]) -> None:
        """Insert new jobs' rows (values in :data:`projections.rules.queue.COLUMNS` order)
        and update the others (``queue_update_row``)."""

    @abstractmethod
    def _write_definitions(self, rows: list[dict[str, Any]]) -> None: ...

    @abstractmethod
    def _execute_writes(self, writes: list[ViewWrite]) -> None:
        """Run projection writes in order (consecutive writes of one query may be batched)."""

    @abstractmethod
    def _notify_jobs_available(self) -> None:
        """Tell other processes, at commit, that jobs may be claimable."""

    @abstractmethod
    def _notify_jobs_cancelled(self) -> None:
        """Tell other processes, at commit, that leased jobs were cancelled (their pools
        stop the handlers)."""

    @abstractmethod
    def serialise_appends(self) -> None:
        """Block other appenders until commit, before reading what an append must not race."""

    def stream_version(self, stream_id: UUID) -> int:
        """A stream's newest version in this transaction (0: none), for an append to a
        stream no view folds (``stream_changes``)."""
        rows = self._rows("stream_version", {"stream_id": self._ids.key(stream_id)})
        return int(rows[0]["version"])

    # --- reads ------------------------------------------------------------------------------

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

        The rows carry their types' definitions: :meth:`definitions` of the claimed jobs'
        types then asks nothing more of the database."""
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
        for row in self._rows(query, params):
            state = decode_state(row["state"])
            loaded.append(LoadedJob(state, row["enqueue_seq"]))
            # The queries skip paused queues and rate keys without a token; a limited type's
            # jobs still need counting against their bucket (ledger.api.rate_room). Kept
            # across the claim's asks (the concurrency step may ask again).
            if row["rate_limited"]:
                self.rate_limited.add(state.job_id)
            blob = row["definition"]
            if blob is not None and state.job_type not in self._definitions:
                self._definitions[state.job_type] = decode_definition_row(
                    blob, row["definition_version"]
                )
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

    def all_definitions(self) -> list[DefinitionState]:
        """Every job type's definition, read now (and remembered)."""
        found = [
            decode_definition_row(row["state"], row["stream_version"])
            for row in self._rows("definitions_all", {})
        ]
        for state in found:
            self._definitions[state.definition.job_type] = state
        return found

    def loaded(self, job_id: UUID) -> JobState | None:
        """A job's state as this unit of work last read or folded it."""
        return self._loaded_state(job_id)

    def expired_leases(self, now: datetime, limit: int) -> list[JobState]:
        """Leased jobs whose lease ended strictly before ``now``, oldest first, locked
        (rows locked by another transaction skipped). A deferred reap pushed its job's lease
        out (``job_reap_deferred``), so it is left out until that lease ends."""
        params = {"now": to_us(now), "limit": limit}
        return self._remember(self._fetch_jobs("queue_expired_leases", params))

    def histories(self, originator_ids: Sequence[UUID]) -> dict[UUID, list[Record]]:
        """Every event of each stream, in order, read in this transaction."""
        if not originator_ids:
            return {}
        keys = self._ids.keys(set(originator_ids))
        found: dict[UUID, list[Record]] = {i: [] for i in originator_ids}
        for originator_id, version, topic, state in self._fetch_events(keys):
            found[originator_id].append(
                Record(originator_id, version, self._codec.decode(topic, state))
            )
        return found

    @abstractmethod
    def _fetch_events(self, keys: Any) -> list[tuple[UUID, int, str, bytes]]:
        """Run ``events_of_streams``."""

    @contextmanager
    def savepoint(self) -> Iterator[None]:
        """A nested transaction: an error inside rolls back only what was done inside, and
        is raised as a ledger error; the unit of work goes on as if the block never ran."""
        saved = self._remembered()
        try:
            with self._savepoint():
                yield
        except BaseException:
            self._restore(saved)
            raise

    def _remembered(self) -> dict[str, Any]:
        """What the unit of work knows that a rolled-back savepoint must undo: the states
        it folded, and whether a NOTIFY (rolled back too) has been sent."""
        return {
            "_jobs": dict(self._jobs),
            "_definitions": dict(self._definitions),
            "_runs": dict(self._runs),
            "_run_locks": set(self._run_locks),
            "jobs_became_available": self.jobs_became_available,
            "leased_jobs_cancelled": self.leased_jobs_cancelled,
        }

    def _restore(self, saved: dict[str, Any]) -> None:
        for name, value in saved.items():
            setattr(self, name, value)

    @abstractmethod
    def _savepoint(self) -> AbstractContextManager[None]: ...

    def set_lock_timeout(self, seconds: float) -> None:
        """Wait at most ``seconds`` for any lock from now until commit, where the backend
        supports it (SQLite: no; its writers are already serialised by BEGIN IMMEDIATE)."""

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

    def definitions(self, job_types: Sequence[str]) -> dict[str, DefinitionState]:
        wanted = [t for t in set(job_types) if t not in self._definitions]
        if wanted:
            for state in self._fetch_definitions(wanted):
                self._definitions[state.definition.job_type] = state
        return {t: self._definitions[t] for t in job_types if t in self._definitions}

    def token(self, token_id: UUID) -> TokenState | None:
        """A token's state from the tokens view (``None``: no such token)."""
        rows = self._rows("tokens_get", {"token_id": str(token_id)})
        return token_of_row(rows[0]) if rows else None

    def lock_rate_types(self, job_types: Sequence[str]) -> None:
        """Hold off other claims of ``job_types`` until commit, before reading their buckets
        (SQLite: nothing to do, ``BEGIN IMMEDIATE`` already serialises writers)."""

    def rate_buckets(self, job_types: Sequence[str]) -> list[RateBucket]:
        """The rate buckets of ``job_types`` (every key of each)."""
        params = {"job_types": self._ids.values(job_types)}
        return [bucket_of_row(row) for row in self._rows("rate_buckets_of_types", params)]

    def queue_state(self, name: str) -> QueueState | None:
        """A queue's pause state (``None``: never paused)."""
        rows = self._rows("queue_states_get", {"queue": name})
        return queue_state_of_row(rows[0]) if rows else None

    def schedule(self, name: str) -> ScheduleState | None:
        """A schedule's state from the schedules view (``None``: no such schedule)."""
        rows = self._rows("schedules_get", {"name": name})
        return schedule_of_row(rows[0]) if rows else None

    def due_schedules(self, now_us: int, limit: int) -> list[ScheduleState]:
        """The active schedules whose next slot is at or before ``now_us``, soonest first."""
        rows = self._rows("schedules_due", {"now": now_us, "limit": limit})
        return [schedule_of_row(row) for row in rows]

    def source_poll(self, source: str) -> SourcePollState | None:
        """A source's poll state from the source-polls view (``None``: never polled)."""
        rows = self._rows("source_polls_get", {"source": source})
        return source_poll_of_row(rows[0]) if rows else None

    def sync_state_rows(self, source_id: str) -> dict[str, str | None]:
        """``{uri: revision}`` of every sync-state row of one source, read in this unit of
        work (a poll diffs against what its own transaction sees)."""
        rows = self._rows("sync_state_of_source", {"source_id": source_id})
        return {row["uri"]: row["revision"] for row in rows}

    # --- the one write ----------------------------------------------------------------------

    def append(
        self,
        job_changes: Sequence[tuple[UUID, Sequence[JobEvent]]] = (),
        definition_changes: Sequence[tuple[str, Sequence[Event]]] = (),
        run_changes: Sequence[RunEvents] = (),
        token_changes: Sequence[tuple[UUID, Sequence[Event]]] = (),
        schedule_changes: Sequence[tuple[str, Sequence[Event]]] = (),
        *,
        source_changes: Sequence[tuple[str, Sequence[Event]]] = (),
        stream_changes: Sequence[tuple[UUID, int, Sequence[Event]]] = (),
        queue_changes: Sequence[tuple[str, Sequence[Event]]] = (),
    ) -> dict[UUID, JobState]:
        """Fold, append and project ``job_changes`` (and job-type and run changes) in this
        transaction.

        Every job in ``job_changes`` must have been read in this unit of work, unless its first
        event is ``job_enqueued``; every run in ``run_changes`` read under its release lock
        (:meth:`lock_runs`), unless its first event is ``workflow_submitted``. Runs are folded
        before jobs: a released step's ``workflow_step_released`` precedes its job's
        ``job_enqueued``. Returns the jobs' new states.
        """
        fold = AppendFold(
            self._loaded_state,
            triggers=[] if self.policies else None,
            trigger_types=trigger_types(self.policies),
            loaded_run=self._loaded_run,
        )
        new_definitions = fold.fold_definitions(definition_changes, self._definitions)
        new_tokens = fold.fold_tokens(token_changes, self.token)
        new_schedules = fold.fold_schedules(schedule_changes, self.schedule)
        new_source_polls = fold.fold_source_polls(source_changes, self.source_poll)
        new_queues = fold.fold_queue_states(queue_changes, self.queue_state)
        fold.fold_runs(run_changes)
        fold.fold_jobs(job_changes)
        for stream_id, version, events in stream_changes:
            fold.records.extend(
                (stream_id, version + offset, event) for offset, event in enumerate(events, 1)
            )
        asked: list[UUID] | None = None
        if fold.triggers:
            asked = list(fold.states)  # follow-ups' jobs are not the caller's to see
            follow_policies(self.policies, fold.triggers, fold, self)
        if not fold.records:
            return {}
        encode = self._codec.encode
        stored = [
            EventRow(originator_id, version, *encode(event))
            for originator_id, version, event in fold.records
        ]
        # Only new jobs need positions (their enqueue_seq); without them a backend need not
        # wait for the insert's result before sending the view writes.
        new_jobs = sum(job_id not in self._jobs for job_id in fold.states)
        with self._write_phase(new_jobs):
            positions = self._insert_stored_events(stored, positions_needed=new_jobs > 0)
            first_positions: dict[UUID, int] = {}
            if positions is not None:
                first_positions = {
                    originator_id: position
                    for (originator_id, version, _), position in zip(
                        fold.records, positions, strict=True
                    )
                    if version == 1
                }
            self._write_queue_rows(fold.states, first_positions)
            if fold.view_writes:
                self._execute_writes(fold.view_writes)
            self._notify(fold)
            if new_definitions:
                self._write_definition_rows(new_definitions)
            if fold.runs:
                self._write_run_rows(fold.runs)
            if new_tokens:
                rows = [token_row(state) for state in new_tokens.values()]
                self._execute_writes([ViewWrite("tokens_upsert", row) for row in rows])
            if new_schedules:
                rows = [schedule_row(state) for state in new_schedules.values()]
                self._execute_writes([ViewWrite("schedules_upsert", row) for row in rows])
            if new_source_polls:
                rows = [source_poll_row(state) for state in new_source_polls.values()]
                self._execute_writes([ViewWrite("source_polls_upsert", row) for row in rows])
            if new_queues:
                rows = [queue_state_row(state) for state in new_queues.values()]
                self._execute_writes([ViewWrite("queue_states_upsert", row) for row in rows])
                resumed = any(not state.paused for state in new_queues.values())
                if resumed and not self.jobs_became_available:
                    self._notify_jobs_available()  # a resumed queue's jobs are claimable
                    self.jobs_became_available = True
        return fold.states if asked is None else {job_id: fold.states[job_id] for job_id in asked}

    def _notify(self, fold: AppendFold) -> None:
        """Tell other processes, once per transaction each, that jobs may be claimable and
        that leased jobs were cancelled."""
        if fold.makes_claimable and not self.jobs_became_available:
            self._notify_jobs_available()
            self.jobs_became_available = True
        if fold.cancels_leased and not self.leased_jobs_cancelled:
            self._notify_jobs_cancelled()
            self.leased_jobs_cancelled = True

    def _loaded_state(self, job_id: UUID) -> JobState | None:
        loaded = self._jobs.get(job_id)
        return loaded.state if loaded is not None else None

    def _loaded_run(self, run_id: UUID) -> RunState | None:
        loaded = self._runs.get(run_id)
        return loaded.state if loaded is not None else None

    def _write_run_rows(self, runs: dict[UUID, RunState]) -> None:
        """Each changed run's row, and the rows of the steps whose state changed (a step's
        end writes the run, that step and the dependents it counted down or released)."""
        writes = []
        for run_id, state in runs.items():
            key = self._ids.key(run_id)
            known = self._runs.get(run_id)
            submitted = known.submitted if known is not None else len(state.request.steps)
            writes.append(ViewWrite("workflow_run_upsert", run_row(state, key, submitted)))
            read = known.steps if known is not None else {}
            read_dependents = known.state.dependents if known is not None else {}
            for step_key, step in state.steps.items():
                # An append adds dependents to steps it does not otherwise change.
                if read.get(step_key) is step and (
                    read_dependents.get(step_key) == state.dependents[step_key]
                ):
                    continue
                job_key = None if step.job_id is None else self._ids.key(step.job_id)
                row = step_row(key, step, state.dependents[step_key], job_key)
                writes.append(ViewWrite("workflow_step_upsert", row))
            self._runs[run_id] = LoadedRun(state, dict(state.steps), submitted)
        self._execute_writes(writes)

    def _write_queue_rows(
        self, states: dict[UUID, JobState], first_positions: dict[UUID, int]
    ) -> None:
        inserts: list[tuple[Any, ...]] = []
        updates: list[dict[str, Any]] = []
        for job_id, state in states.items():
            key = self._ids.key(job_id)
            known = self._jobs.get(job_id)
            if known is None:
                seq = first_positions[job_id]
                inserts.append(queue_values(state, seq, key))
            else:
                seq = known.enqueue_seq
                updates.append(queue_update_row(state, key))
            self._jobs[job_id] = LoadedJob(state, seq)
        self._write_queue(inserts, updates)

    def _write_definition_rows(self, definitions: dict[str, DefinitionState]) -> None:
        rows = []
        for job_type, definition in definitions.items():
            rows.append(definition_row(definition))
            self._definitions[job_type] = definition
        self._write_definitions(rows)
