"""The source commands: :class:`SourceCommands`, what ``ledger.sources`` hands out.

The reads of :class:`~ledger.sources.source_reader.SourceReader` plus a listing synced into
jobs, a poll (:mod:`ledger.sources.source_polls`) and the enqueue of a poll job. The jobs go
through the ledger's own enqueue (:class:`~ledger.jobs.binding.LedgerBinding`).
"""

from __future__ import annotations

from collections.abc import Callable
from uuid import UUID

from ledger.core.errors import InvalidRequestError
from ledger.core.source_diff import Listing, SourceSync
from ledger.core.source_polls.decide import (
    POLL_JOB_MAX_ATTEMPTS,
    POLL_JOB_TIMEOUT_S,
    SourceConfig,
    SourcePoll,
)
from ledger.core.source_polls.events import SOURCE_POLL_JOB_TYPE
from ledger.core.values import EnqueueRequest
from ledger.jobs.binding import LedgerBinding
from ledger.jobs.enqueueing import sync_listing
from ledger.sources import source_polls
from ledger.sources.source_reader import SourceReader
from ledger.views.kinds import DEFINITIONS


class SourceCommands(SourceReader):
    """The source reads and commands of one ledger."""

    def __init__(self, bound: LedgerBinding) -> None:
        super().__init__(bound.store, bound.clock)
        self._bound = bound

    def sync(
        self, source_id: str, listing: Listing, *, job_type: str, org: str | None = None
    ) -> SourceSync:
        """Diff a complete listing of source ``source_id`` against its sync state (see
        :func:`ledger.core.source_diff.diff_source`) and enqueue a ``job_type`` job per upsert and
        delete, in one enqueue transaction (all or none).

        Upsert subjects carry the listing's revision; payloads are empty (the subject says
        what to do). A change whose subject already has a live job is not enqueued but
        reported in ``skipped``: that job will settle the URI, and the next poll decides
        again. The sync state is read once, before the enqueue: a job that succeeds in
        between can at worst cause a redundant job, and the next poll sees what it hid.
        """
        return sync_listing(
            self.store,
            lambda requests: self._bound.enqueue(requests).results,
            source_id,
            listing,
            job_type=job_type,
            org=org,
        )

    def poll(
        self,
        source: str,
        lister: Callable[[], Listing],
        config: SourceConfig,
        *,
        poll_job_id: UUID | None = None,
    ) -> SourcePoll:
        """Poll ``source`` once with ``lister`` (see :mod:`ledger.sources.source_polls`):
        skipped while its breaker is open; else the listing diffed against the sync state and
        its changes enqueued as ``config.job_type`` jobs in the commit that appends
        ``source_polled``; a lister that raises is ``source_poll_failed`` (and, at the
        breaker's threshold, ``source_breaker_opened``). A failed poll is a result, not an
        exception: only the store's own errors raise."""
        return source_polls.poll_source(
            self.store,
            self.clock,
            source,
            lister,
            config,
            auto_define=self._bound.auto_define,
            new_id=self._bound.new_id,
            poll_job_id=poll_job_id,
        )

    def enqueue_poll(self, source: str, *, actor: str | None = None) -> UUID:
        """Enqueue one ``jobledger.source_poll`` job for ``source`` (a worker whose registry
        has its lister runs it), defining the built-in type first if it is not yet."""
        if not isinstance(source, str) or not source:
            raise InvalidRequestError("a source's name must be a non-empty string")
        defined = self.store.states(DEFINITIONS)
        if not any(state.definition.job_type == SOURCE_POLL_JOB_TYPE for state in defined):
            self._bound.define(
                SOURCE_POLL_JOB_TYPE,
                max_attempts=POLL_JOB_MAX_ATTEMPTS,
                default_timeout_s=POLL_JOB_TIMEOUT_S,
            )
        request = EnqueueRequest(job_type=SOURCE_POLL_JOB_TYPE, payload={"source": source})
        plan = self._bound.enqueue([request], actor=actor)
        job_id = plan.results[0] if plan.results[0] is not None else plan.skipped_by[0]
        assert job_id is not None, "a poll job has no subject: it is created or existing"
        return job_id
