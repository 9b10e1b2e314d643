"""What an enqueue answers: :class:`Enqueued`, which says what happened to the request and is a
handle on the job it names.

Every outcome names a job. ``created``: a new job; ``existing``: an idempotent repeat named
the job already holding the key; ``skipped``: the request's sync subject already had a live
job, so nothing was appended and ``job_id`` is *that* job (the one that will settle the
subject, and the one to wait on).

The handle holds no state of its own: :meth:`Enqueued.status`, :meth:`Enqueued.output` and
:meth:`Enqueued.history` read through the ledger on each call. :meth:`Enqueued.wait` waits for
a terminal state, woken by the store's notifications of appended events on PostgreSQL
(``LISTEN``) and polling on SQLite (commits of this process wake it at once); its deadline is
measured on the ledger's clock, so a test with a :class:`~ledger.clock.FakeClock` ends it by
advancing the clock.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Generic, Literal, TypeVar, cast
from uuid import UUID

import msgspec

from ledger.core.codec import Record
from ledger.core.enqueue_plan import EnqueuePlan
from ledger.core.errors import JobNotFoundError, JobNotSucceededError, JobWaitTimeoutError
from ledger.core.state import JobState
from ledger.core.values import JobStatus
from ledger.store.follow import event_waiter

if TYPE_CHECKING:
    from ledger.api.reader import Reader

OutputT = TypeVar("OutputT")

EnqueueOutcome = Literal["created", "existing", "skipped"]
"""What one enqueue request did (see the module docstring)."""

POLL_S = 0.05
"""How often a wait looks again without notifications (SQLite)."""
LISTENING_POLL_S = 1.0
"""How often a wait looks again with notifications (PostgreSQL): only a lost notification, or
the deadline, needs it."""


class Enqueued(Generic[OutputT]):
    """One enqueue's outcome and a handle on the job it names.

    Compares equal to another with the same ``job_id`` and ``outcome``. ``OutputT`` is the
    type :meth:`output` decodes the job's output to (a typed job's declared return type;
    ``Any`` for a plain enqueue, whose output is the stored JSON)."""

    __slots__ = ("_output_type", "_reader", "job_id", "outcome")

    def __init__(
        self,
        reader: Reader,
        job_id: UUID,
        outcome: EnqueueOutcome,
        output_type: Any = None,
    ) -> None:
        self._reader = reader
        self._output_type = output_type
        self.job_id = job_id
        """The new job, the existing one (idempotent repeat), or the subject's live job."""
        self.outcome: EnqueueOutcome = outcome

    @property
    def created(self) -> bool:
        """Whether this enqueue made a new job."""
        return self.outcome == "created"

    def __repr__(self) -> str:
        return f"Enqueued(job_id={self.job_id!s}, outcome={self.outcome!r})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Enqueued):
            return NotImplemented
        return (self.job_id, self.outcome) == (other.job_id, other.outcome)

    def __hash__(self) -> int:
        return hash((self.job_id, self.outcome))

    # --- reads --------------------------------------------------------------------------------

    def job(self) -> JobState:
        """The job's current state (from the queue view)."""
        found = self._reader.get(self.job_id)
        if found is None:  # only after retention moved it away, or on another database
            raise JobNotFoundError(f"no job {self.job_id}")
        return found

    def status(self) -> JobStatus:
        return self.job().status

    def history(self) -> list[Record]:
        """The job's events, in order, as :meth:`Reader.history
        <ledger.api.reader.Reader.history>` gives them."""
        return self._reader.history(self.job_id)

    def output(self) -> OutputT:
        """The succeeded job's output, decoded to the typed job's output type (if it declared
        one). A job that has not succeeded — still live, dead or cancelled — has none: that is
        a :class:`~ledger.core.errors.JobNotSucceededError` naming its status and last error."""
        return self._output_of(self.job())

    def _output_of(self, job: JobState) -> OutputT:
        if job.status is not JobStatus.SUCCEEDED:
            reason = f": {job.last_error.code}: {job.last_error.message}" if job.last_error else ""
            raise JobNotSucceededError(
                f"job {self.job_id} ({job.job_type}) has no output: it is {job.status}{reason}"
            )
        if self._output_type is None:
            return cast(OutputT, job.output)  # a plain job's: the stored JSON
        return cast(OutputT, msgspec.convert(job.output, self._output_type))

    # --- waiting ------------------------------------------------------------------------------

    def wait(self, timeout: float) -> JobState:
        """Wait until the job is terminal (succeeded, dead or cancelled) and return its state.

        ``timeout`` is seconds on the ledger's clock; when it passes first, a
        :class:`~ledger.core.errors.JobWaitTimeoutError` (a :class:`TimeoutError`) names the
        job and the status it was left in. The job itself is not touched."""
        job = self.job()
        if not job.status.is_live:
            return job
        clock = self._reader.clock
        deadline = clock.now() + timedelta(seconds=timeout)
        store = self._reader.store
        waiter = event_waiter(store)
        pause = LISTENING_POLL_S if store.has_notifications else POLL_S
        try:
            while True:
                job = self.job()  # after the waiter started, so no commit is missed
                if not job.status.is_live:
                    return job
                if clock.now() >= deadline:
                    raise JobWaitTimeoutError(
                        f"job {self.job_id} ({job.job_type}) still {job.status} after "
                        f"waiting {timeout:g}s"
                    )
                waiter.wait(pause)
        finally:
            waiter.close()

    def wait_output(self, timeout: float) -> OutputT:
        """:meth:`wait`, then :meth:`output` of the state it ended in."""
        return self._output_of(self.wait(timeout))


def handles_of(reader: Reader, plan: EnqueuePlan, output_type: Any = None) -> list[Enqueued[Any]]:
    """One :class:`Enqueued` per request of ``plan``, in request order."""
    return list(_handles(reader, plan, output_type))


def _handles(reader: Reader, plan: EnqueuePlan, output_type: Any) -> Iterator[Enqueued[Any]]:
    skipped_by = plan.skipped_by or [None] * len(plan.results)
    for job_id, created, live_job in zip(plan.results, plan.created, skipped_by, strict=True):
        if job_id is not None:
            yield Enqueued(reader, job_id, "created" if created else "existing", output_type)
        else:
            assert live_job is not None, "a request without a job is one a live subject skipped"
            yield Enqueued(reader, live_job, "skipped", output_type)
