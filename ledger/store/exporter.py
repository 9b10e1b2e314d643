"""Export: the whole histories of selected jobs, streamed out in the exchange format.

Everything is read in one snapshot (``Store.read_snapshot()``), so the file is one
consistent moment of the ledger even while workers write. Jobs are taken in pages of
:data:`PAGE` in the order of their first event (``exchange_jobs_after`` walks the events table
by position, :data:`WINDOW` positions at most per query); each page's histories are read in
one query and written out before the next page is read, so memory holds one page, not the
ledger. The selection is walked twice: first to learn
which job types the jobs use (their definition streams come first in the file) and which
workflow runs their steps belong to, then to write.

The file ends with the trailer (:mod:`ledger.core.exchange_trailer`): the streams and events
written and the digest of every byte before it, computed as the bytes go out, so that an
import can tell a whole file from one cut short.

Workflow runs come last, each whole, in the order of their first event: every run when the
selection is everything, else the runs of the selected jobs that run a step. A run's step jobs
come with it even when the selection leaves them out (after the selected jobs), so that an
import never holds a run without its steps' histories.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any
from uuid import UUID

import msgspec

from ledger.core.errors import InvalidRequestError, JobNotFoundError
from ledger.core.events import JobEnqueued
from ledger.core.exchange import (
    FORMAT_VERSION,
    SEALED_VERSION,
    Selection,
    StreamKind,
    event_line,
    header_line,
    stored_fields,
)
from ledger.core.exchange_trailer import ChainSeal, FileDigest, StreamCounts, Trailer, trailer_line
from ledger.core.integrity import ChainHead
from ledger.core.workflows.events import WorkflowStepReleased
from ledger.store.integrity_tables import chain_head
from ledger.store.reads import ReadSnapshot
from ledger.store.store import Store
from ledger.store.streams import job_type_stream_id

PAGE = 500
"""Jobs read (and their histories written) per query."""
WINDOW = 5_000
"""Positions of the history one selection query scans, whatever its filters admit."""

Write = Callable[[bytes], object]
Seal = Callable[[str, ChainHead], ChainSeal]
"""``seal(digest, head)``: a sealed file's :class:`ChainSeal` (signed by the caller's key)."""
ExportProgress = Callable[[int, int], None]
"""``progress(jobs, events)``: called after each page with the totals so far."""


class ExportReport(msgspec.Struct, frozen=True):
    """What an export wrote: definition streams, jobs and event lines."""

    definitions: int
    jobs: int
    events: int
    runs: int = 0


class _Job(msgspec.Struct, frozen=True):
    position: int
    job_id: UUID
    job_type: str
    run_id: UUID | None
    """The workflow run the job runs a step of (its enqueue's link)."""


class Exporter:
    """Writes the histories a :class:`Selection` picks from one store."""

    def __init__(self, store: Store, *, page: int | None = None, window: int | None = None) -> None:
        self.store = store
        self.page = page or PAGE
        self.window = window or WINDOW

    def export(
        self,
        write: Write,
        selection: Selection,
        progress: ExportProgress | None = None,
        *,
        seal: Seal | None = None,
    ) -> ExportReport:
        """Write the header, the definitions the selected jobs use, the jobs, their runs,
        then the trailer (the digest of everything before it, taken as it is written).
        ``seal``: make a sealed (version-3) file, whose trailer's ``chain`` is
        ``seal(digest, head)``: the source's chain head read in the export's snapshot."""
        if selection.job_ids:
            found = self.store.get_jobs(list(selection.job_ids))
            missing = [str(i) for i in selection.job_ids if i not in found]
            if missing:
                raise JobNotFoundError(f"no job {', '.join(missing)}")
        with self.store.read_snapshot() as tables:
            head = chain_head(tables) if seal is not None else None
            if seal is not None and (head is None or head.events == 0):
                raise InvalidRequestError(
                    "a sealed export names the source's chain head, and this ledger's chain "
                    "has hashed no event yet (`jobledger integrity checkpoint` first)"
                )
            types: set[str] = set()
            step_jobs: set[UUID] = set()
            linked: set[UUID] = set()
            for page in self._pages(tables, selection):
                for job in page:
                    types.add(job.job_type)
                    if job.run_id is not None:
                        step_jobs.add(job.job_id)
                        linked.add(job.run_id)
            runs = self._runs(tables, None if selection == Selection() else linked)
            added = self._unselected_steps(tables, runs, step_jobs)
            job_types = sorted(types | {job.job_type for job in added})
            digest = FileDigest()

            def digested(data: bytes) -> None:
                digest.update(data)
                write(data)

            digested(header_line(FORMAT_VERSION if seal is None else SEALED_VERSION))
            events = self._write_streams(
                tables, digested, StreamKind.JOB_TYPE, [job_type_stream_id(t) for t in job_types]
            )
            jobs = 0
            pages = self._pages(tables, selection)
            extra = (added[i : i + self.page] for i in range(0, len(added), self.page))
            for page in (*pages, *extra):
                events += self._write_streams(
                    tables, digested, StreamKind.JOB, [job.job_id for job in page]
                )
                jobs += len(page)
                if progress is not None:
                    progress(jobs, events)
            for start in range(0, len(runs), self.page):
                chunk = runs[start : start + self.page]
                events += self._write_streams(tables, digested, StreamKind.WORKFLOW, chunk)
            streams = StreamCounts(job_type=len(job_types), job=jobs, workflow=len(runs))
            sealed = None if seal is None or head is None else seal(digest.value(), head)
            trailer = Trailer(events=events, streams=streams, digest=digest.value(), chain=sealed)
            write(trailer_line(trailer))
        return ExportReport(definitions=len(job_types), jobs=jobs, events=events, runs=len(runs))

    def _runs(self, tables: ReadSnapshot, named: set[UUID] | None) -> list[UUID]:
        """The runs to write (``None``: every run), in the order of their first event."""
        if named is None:
            rows = tables.fetch("exchange_runs_all")
        elif named:
            rows = tables.fetch("exchange_runs_named", {"run_ids": tables.ids.keys(named)})
        else:
            return []
        return [tables.ids.uuid(row["run_id"]) for row in rows]

    def _unselected_steps(
        self, tables: ReadSnapshot, runs: list[UUID], selected: set[UUID]
    ) -> list[_Job]:
        """The step jobs of ``runs`` that the selection left out, in the order of their
        first event."""
        wanted: list[UUID] = []
        for start in range(0, len(runs), self.page):
            histories = tables.histories(runs[start : start + self.page])
            for records in histories.values():
                wanted += [
                    r.event.job_id
                    for r in records
                    if isinstance(r.event, WorkflowStepReleased)
                    and r.event.job_id is not None
                    and r.event.job_id not in selected
                ]
        if not wanted:
            return []
        params = {"job_ids": tables.ids.keys(wanted), "job_type": None, "org": None, "status": None}
        return self._admitted(tables, tables.fetch("exchange_jobs_named", params), Selection())

    def _pages(self, tables: ReadSnapshot, selection: Selection) -> Iterator[list[_Job]]:
        """The selected jobs, a page at a time, in the order of their first event."""
        params: dict[str, Any] = {
            "job_type": selection.job_type,
            "org": selection.org,
            "status": selection.status,
        }
        if selection.job_ids:
            params["job_ids"] = tables.ids.keys(selection.job_ids)
            rows = tables.fetch("exchange_jobs_named", params)
            jobs = self._admitted(tables, rows, selection)
            for start in range(0, len(jobs), self.page):
                yield jobs[start : start + self.page]
            return
        after, head = 0, tables.head()
        while after < head:
            upto = min(after + self.window, head)
            rows = tables.fetch(
                "exchange_jobs_after", {**params, "after": after, "upto": upto, "limit": self.page}
            )
            # A full page may stop short of the window's end: go on from its last job.
            after = int(rows[-1]["position"]) if len(rows) == self.page else upto
            jobs = self._admitted(tables, rows, selection)
            if jobs:
                yield jobs

    def _admitted(
        self, tables: ReadSnapshot, rows: Sequence[Any], selection: Selection
    ) -> list[_Job]:
        decode = tables.decode
        jobs = []
        for row in rows:
            first = decode(row["topic"], row["state"])
            assert isinstance(first, JobEnqueued)
            if not selection.admits_enqueue_time(first.at):
                continue
            link = first.workflow
            job_id = tables.ids.uuid(row["job_id"])
            run_id = None if link is None else link.run_id
            jobs.append(_Job(int(row["position"]), job_id, row["job_type"], run_id))
        return jobs

    def _write_streams(
        self, tables: ReadSnapshot, write: Write, kind: StreamKind, stream_ids: list[UUID]
    ) -> int:
        """Write the streams' events, stream after stream in the given order; how many."""
        if not stream_ids:
            return 0
        rows = tables.fetch("events_of_streams", {"originator_ids": tables.ids.keys(stream_ids)})
        by_stream: dict[UUID, list[bytes]] = {stream_id: [] for stream_id in stream_ids}
        codec = tables.codec
        for row in rows:
            stream_id = tables.ids.uuid(row["originator_id"])
            topic, state = row["topic"], bytes(row["state"])
            by_stream[stream_id].append(
                event_line(
                    stream_id,
                    kind,
                    int(row["originator_version"]),
                    topic,
                    stored_fields(codec, topic, state),
                )
            )
        lines = [line for stream_id in stream_ids for line in by_stream[stream_id]]
        write(b"".join(lines))
        return len(lines)
