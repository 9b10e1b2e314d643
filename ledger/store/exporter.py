"""Export: the whole histories of selected jobs, streamed out in the exchange format.

Everything is read in one snapshot (``Store.read_snapshot()``), so the file is one
consistent moment of the ledger even while workers write. Jobs are taken in pages of
:data:`PAGE` in the order of their first event (``exchange_jobs_after`` walks the events table
by position, :data:`WINDOW` positions at most per query); each page's histories are read in
one query and written out before the next page is read, so memory holds one page, not the
ledger. The selection is walked twice: first to learn
which job types the jobs use (their definition streams come first in the file), then to write.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any
from uuid import UUID

import msgspec

from ledger.core.errors import JobNotFoundError
from ledger.core.exchange import Selection, StreamKind, event_line, header_line, stored_fields
from ledger.store.reads import ReadSnapshot
from ledger.store.store import Store
from ledger.store.streams import job_type_stream_id

PAGE = 500
"""Jobs read (and their histories written) per query."""
WINDOW = 5_000
"""Positions of the history one selection query scans, whatever its filters admit."""

Write = Callable[[bytes], object]
ExportProgress = Callable[[int, int], None]
"""``progress(jobs, events)``: called after each page with the totals so far."""


class ExportReport(msgspec.Struct, frozen=True):
    """What an export wrote: definition streams, jobs and event lines."""

    definitions: int
    jobs: int
    events: int


class _Job(msgspec.Struct, frozen=True):
    position: int
    job_id: UUID
    job_type: str


class Exporter:
    """Writes the histories a :class:`Selection` picks from one store."""

    def __init__(self, store: Store, *, page: int | None = None, window: int | None = None) -> None:
        self.store = store
        self.page = page or PAGE
        self.window = window or WINDOW

    def export(
        self, write: Write, selection: Selection, progress: ExportProgress | None = None
    ) -> ExportReport:
        """Write the header, the definitions the selected jobs use, then the jobs."""
        if selection.job_ids:
            found = self.store.get_jobs(list(selection.job_ids))
            missing = [str(i) for i in selection.job_ids if i not in found]
            if missing:
                raise JobNotFoundError(f"no job {', '.join(missing)}")
        with self.store.read_snapshot() as tables:
            job_types = sorted(
                {job.job_type for page in self._pages(tables, selection) for job in page}
            )
            write(header_line())
            events = self._write_streams(
                tables, write, StreamKind.JOB_TYPE, [job_type_stream_id(t) for t in job_types]
            )
            jobs = 0
            for page in self._pages(tables, selection):
                events += self._write_streams(
                    tables, write, StreamKind.JOB, [job.job_id for job in page]
                )
                jobs += len(page)
                if progress is not None:
                    progress(jobs, events)
        return ExportReport(definitions=len(job_types), jobs=jobs, events=events)

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
        timed = selection.since is not None or selection.until is not None
        decode = tables.decode
        return [
            _Job(int(row["position"]), tables.ids.uuid(row["job_id"]), row["job_type"])
            for row in rows
            if not timed or selection.admits_enqueue_time(decode(row["topic"], row["state"]).at)
        ]

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
