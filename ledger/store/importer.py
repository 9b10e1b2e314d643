"""Import: load a file of the exchange format into a ledger, all or nothing per file.

Three passes over the file (which is why it is opened by a callable that can open it again):

1. **validate** every line without touching the database
   (:func:`ledger.core.exchange_reader.read_streams`: header, shapes, fields, the bounds
   enqueue and the worker writes enforce, order, each stream's fold, the trailer's counts and
   digest), so a bad or cut-short file writes nothing and the refusal names its line;
2. **check** each stream against the target in one read snapshot: a stream the target
   already holds must be the same events (then it is skipped); any other difference, or a
   new job whose idempotency key or live sync subject a target job holds (the queue view's
   unique indexes), is an :class:`~ledger.core.exchange.ImportConflictError` and nothing is
   written;
3. **append** the new streams in batches of whole streams (definitions first), all batches in
   one unit of work, i.e. one transaction through the same fold and inline view writes as the
   live commands, with the file's stream ids, versions and times. Each batch checks its
   streams again, so a writer racing the import is refused rather than merged, and any
   failure (a conflict, a database refusal) rolls the whole file back. Every pass reads the
   file afresh and checks its trailer again, the last one before the transaction commits: a
   file changed between the passes is refused and nothing of it stays.

Job and run ids are global, so a stream present in both must be the same history. A
workflow run's stream comes after the jobs and is appended as it stands, with the store's
policies off for the import: the file already holds every follow-up they wrote (a step's
end, the releases after it), so the same views follow as in the source. An import writes
into a target that holds live work (pending or leased jobs) only when asked to
(``into_live``): that target's workers would start claiming the imported jobs at once.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any
from uuid import UUID

import msgspec

from ledger.core.codec import DEFAULT_CODEC, EventCodec, Record
from ledger.core.errors import ConcurrencyConflictError
from ledger.core.events import JobEvent
from ledger.core.exchange import (
    FileEnd,
    ImportConflictError,
    ImportLiveWorkError,
    ImportSignatureError,
    Stream,
    StreamKind,
)
from ledger.core.exchange_reader import read_streams, same_history
from ledger.core.exchange_trailer import seal_problem
from ledger.core.state import fold
from ledger.core.workflows.events import WorkflowEvent, WorkflowSubmitted
from ledger.store.reads import ReadSnapshot
from ledger.store.store import Store
from ledger.store.streams import job_type_stream_id
from ledger.store.unit_of_work import UnitOfWork
from ledger.views.kinds import DEFINITIONS, JOBS, RUNS

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

BATCH_STREAMS = 500
BATCH_EVENTS = 5_000
"""A batch closes at whichever of these it reaches first (a stream is never split)."""

OpenLines = Callable[[], Iterable[bytes]]
ImportProgress = Callable[[str, int, int], None]
"""``progress(phase, done, total)``: ``validate`` and ``check`` count lines, ``import`` events."""


class ImportReport(msgspec.Struct, frozen=True):
    """What an import did: streams and events appended, streams already there (skipped)."""

    definitions: int
    jobs: int
    events: int
    skipped_definitions: int
    skipped_jobs: int
    skipped_events: int
    lines: int
    runs: int = 0
    skipped_runs: int = 0
    format_version: int = 0
    digest: str | None = None
    """The digest the file's trailer stated and the import checked (``None``: a version-1
    file without a trailer, imported as it stands)."""


def check_seal(end: FileEnd, key: Ed25519PublicKey | None) -> None:
    """Refuse a file (read whole: ``end``) that is not sealed by ``key``, before anything of
    it is written; without a key, only a sealed file whose seal does not hold under the key
    it carries (edited, its digest recomputed)."""
    if end.chain is None and key is None:
        return
    if end.chain is None or end.digest is None:
        raise ImportSignatureError(
            f"the file is not sealed (format version {end.version}); a sealed export "
            "(`export --signing-key`) is version 3; nothing imported"
        )
    problem = seal_problem(end.chain, end.digest, key)
    if problem is not None:
        raise ImportSignatureError(f"the file's seal does not hold: {problem}; nothing imported")


class Importer:
    """Loads exchange files into one store."""

    def __init__(
        self,
        store: Store,
        *,
        allow_untrailed: bool = False,
        verify_key: Ed25519PublicKey | None = None,
    ) -> None:
        self.store = store
        self.allow_untrailed = allow_untrailed
        self.verify_key = verify_key
        """Refuse the file unless it is sealed by this key (``--verify-signature``)."""

    def _streams(self, open_lines: OpenLines) -> Iterator[Stream]:
        return read_streams(
            open_lines(),
            self.store.codec,
            job_type_stream_id,
            allow_untrailed=self.allow_untrailed,
        )

    def validate(self, open_lines: OpenLines, progress: ImportProgress | None = None) -> FileEnd:
        return validate(
            open_lines, self.store.codec, progress, allow_untrailed=self.allow_untrailed
        )

    def import_file(
        self,
        open_lines: OpenLines,
        progress: ImportProgress | None = None,
        *,
        validated: FileEnd | None = None,
        into_live: bool = False,
    ) -> ImportReport:
        """All three passes; ``validated`` (what :meth:`validate` returned for this file)
        skips the first. Raises :class:`ImportLiveWorkError` when the file has streams to
        write and the target holds pending or leased jobs, unless ``into_live``."""
        report = _progress(progress)
        end = validated or self.validate(open_lines, progress)
        check_seal(end, self.verify_key)
        lines = end.lines
        skipped: set[UUID] = set()
        if self.store.head_position() > 0:
            skipped = self._check(open_lines, lambda done: report("check", done, lines))
            if not into_live:
                self._refuse_live_work(open_lines, skipped)
        counts = {"definitions": 0, "jobs": 0, "runs": 0, "events": 0}
        skipped_counts = {"definitions": 0, "jobs": 0, "runs": 0, "events": 0}
        done = 0
        first_line = 0
        try:
            with self.store.unit_of_work() as uow:
                # The file holds every follow-up a policy wrote (a step's end, the releases
                # after it): running the policies again would write them twice.
                uow.policies = ()
                for batch in _batches(self._streams(open_lines)):
                    first_line = batch[0].first_line
                    _append(uow, [stream for stream in batch if stream.stream_id not in skipped])
                    for stream in batch:
                        target = skipped_counts if stream.stream_id in skipped else counts
                        target[_plural(stream.kind)] += 1
                        target["events"] += len(stream.records)
                        done += len(stream.records)
                    report("import", done, end.events)
        except ConcurrencyConflictError as exc:
            # The queue view's unique indexes: two streams of the file (or one of the file and
            # a job written during the import) hold one idempotency key or live sync subject.
            raise ImportConflictError(
                f"the streams from line {first_line} on clash with the target's jobs or with "
                "each other (an idempotency key or a live sync subject taken twice): "
                f"{exc.message}; nothing imported"
            ) from None
        return ImportReport(
            definitions=counts["definitions"],
            jobs=counts["jobs"],
            events=counts["events"],
            skipped_definitions=skipped_counts["definitions"],
            skipped_jobs=skipped_counts["jobs"],
            skipped_events=skipped_counts["events"],
            lines=lines,
            runs=counts["runs"],
            skipped_runs=skipped_counts["runs"],
            format_version=end.version,
            digest=end.digest,
        )

    def _check(self, open_lines: OpenLines, progress: Callable[[int], None]) -> set[UUID]:
        """The streams the target already holds, identical; raise on any that differs."""
        present: set[UUID] = set()
        done = 1
        with self.store.read_snapshot() as tables:
            for batch in _batches(self._streams(open_lines)):
                stored = tables.histories(stream.stream_id for stream in batch)
                for stream in batch:
                    if stored[stream.stream_id]:
                        _same_or_refuse(stream, stored[stream.stream_id])
                        present.add(stream.stream_id)
                    elif stream.kind is StreamKind.JOB:
                        self._check_unique(tables, stream)
                    elif stream.kind is StreamKind.WORKFLOW:
                        self._check_unique_run(tables, stream)
                    done += len(stream.records)
                progress(done)
        return present

    def _check_unique(self, tables: ReadSnapshot, stream: Stream) -> None:
        """Refuse a new job whose idempotency key, or live sync subject, another job of the
        target holds: the queue view's unique indexes would refuse it mid-import."""
        state = fold(_job_event(record) for record in stream.records)
        assert state is not None
        clashes: list[tuple[str, str, dict[str, Any]]] = []
        if state.idempotency_key is not None:
            key = {
                "job_type": state.job_type,
                "org": state.org or "",
                "idempotency_key": state.idempotency_key,
            }
            clashes.append(
                ("queue_find_idempotent", f"idempotency key {state.idempotency_key!r}", key)
            )
        if state.subject is not None and state.status.is_live:
            subject = {"source_id": state.subject.source_id, "uri": state.subject.uri}
            clashes.append(
                ("queue_find_live_subject", f"live sync subject {state.subject.uri!r}", subject)
            )
        for query, what, params in clashes:
            for row in tables.fetch(query, params):
                holder = tables.ids.uuid(row["job_id"])
                if holder != stream.stream_id:
                    raise ImportConflictError(
                        f"{_describe(stream)} has the {what}, which job {holder} "
                        "holds in the target; nothing imported"
                    )

    def _check_unique_run(self, tables: ReadSnapshot, stream: Stream) -> None:
        """Refuse a new run whose idempotency key another run of the target holds (the
        workflow view's unique index would refuse it mid-import)."""
        first = stream.records[0].event
        assert isinstance(first, WorkflowSubmitted)
        request = first.request
        if request.idempotency_key is None:
            return
        params = {
            "workflow_type": request.workflow_type,
            "org": request.org or "",
            "idempotency_key": request.idempotency_key,
        }
        for row in tables.fetch("workflow_run_find_idempotent", params):
            holder = tables.ids.uuid(row["run_id"])
            if holder != stream.stream_id:
                raise ImportConflictError(
                    f"{_describe(stream)} has the idempotency key "
                    f"{request.idempotency_key!r}, which run {holder} holds in the target; "
                    "nothing imported"
                )

    def _refuse_live_work(self, open_lines: OpenLines, skipped: set[UUID]) -> None:
        """Refuse to add streams to a target with pending or leased jobs."""
        counts = self.store.count_by_status()
        live = counts.get("pending", 0) + counts.get("leased", 0)
        if live == 0:
            return
        if all(stream.stream_id in skipped for stream in self._streams(open_lines)):
            return  # nothing to write: a repeated import changes nothing
        raise ImportLiveWorkError(
            f"the target holds {live} live jobs (pending or leased), which its workers may be "
            "running; import into a ledger without live work, or pass --into-live "
            "(into_live=True) to import beside it; nothing imported"
        )


def _append(uow: UnitOfWork, streams: list[Stream]) -> None:
    """Check the streams are still absent, then append them in the import's unit of work."""
    if not streams:
        return
    existing = uow.histories([stream.stream_id for stream in streams])
    for stream in streams:
        if existing.get(stream.stream_id):
            raise ImportConflictError(
                f"{_describe(stream)} was written to the target during the import"
            )
    changes = []
    for stream in streams:
        if stream.kind is StreamKind.JOB_TYPE:
            events = [record.event for record in stream.records]
            changes.append(DEFINITIONS.change(stream.job_type, events))
        elif stream.kind is StreamKind.JOB:
            changes.append(JOBS.change(stream.stream_id, [_job_event(r) for r in stream.records]))
        elif stream.kind is StreamKind.WORKFLOW:
            changes.append(RUNS.change(stream.stream_id, [_run_event(r) for r in stream.records]))
    uow.append(changes)


def validate(
    open_lines: OpenLines,
    codec: EventCodec = DEFAULT_CODEC,
    progress: ImportProgress | None = None,
    *,
    allow_untrailed: bool = False,
) -> FileEnd:
    """Pass 1 alone, touching no database: raise on the first bad line (a missing or wrong
    trailer included); what the file's end held."""
    report = _progress(progress)
    end = FileEnd()
    lines = 1
    streams = read_streams(
        open_lines(), codec, job_type_stream_id, allow_untrailed=allow_untrailed, end=end
    )
    for stream in streams:
        lines += len(stream.records)
        report("validate", lines, 0)
    return end


def _job_event(record: Record) -> JobEvent:
    assert isinstance(record.event, JobEvent)
    return record.event


def _run_event(record: Record) -> WorkflowEvent:
    assert isinstance(record.event, WorkflowEvent)
    return record.event


def _plural(kind: StreamKind) -> str:
    return {StreamKind.JOB: "jobs", StreamKind.WORKFLOW: "runs"}.get(kind, "definitions")


def _describe(stream: Stream) -> str:
    if stream.kind is StreamKind.JOB:
        return f"job {stream.stream_id} (line {stream.first_line})"
    if stream.kind is StreamKind.WORKFLOW:
        return f"workflow run {stream.stream_id} (line {stream.first_line})"
    return f"job type {stream.job_type!r} (line {stream.first_line})"


def _same_or_refuse(stream: Stream, stored: list[Record]) -> None:
    if not same_history(stream.records, stored):
        raise ImportConflictError(
            f"{_describe(stream)} exists in the target with a different history "
            f"({len(stored)} events there, {len(stream.records)} in the file); nothing imported"
        )


def _batches(streams: Iterable[Stream]) -> Iterator[list[Stream]]:
    """Whole streams, definitions never batched with jobs, up to the batch limits."""
    batch: list[Stream] = []
    events = 0
    for stream in streams:
        if batch and (
            len(batch) >= BATCH_STREAMS
            or events + len(stream.records) > BATCH_EVENTS
            or stream.kind is not batch[-1].kind
        ):
            yield batch
            batch, events = [], 0
        batch.append(stream)
        events += len(stream.records)
    if batch:
        yield batch


def _progress(progress: ImportProgress | None) -> ImportProgress:
    return progress or (lambda phase, done, total: None)
