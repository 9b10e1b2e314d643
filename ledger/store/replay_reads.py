"""The store's side of decision replay: each job's history with its type's definitions, and
each workflow run's with its step jobs' histories and the definitions its steps name.

:func:`check_job` reads one job; :func:`check_all` streams every job (or every job of one
type) from one read-only snapshot: a page of job ids by primary key (``replay_job_ids``), then
that page's histories in one query (``events_of_streams``), so memory holds one page of
histories at a time and a failure is never split from its outcome. Without a job type it
then pages through the workflow runs the same way (``replay_run_ids``), each run's stream
and its released jobs' histories read together, then every cron schedule's stream with its
view row (a handful). The checking itself is
:func:`ledger.core.decision_replay.check_history`,
:func:`ledger.core.workflow_replay.check_run` and
:func:`ledger.core.schedules.replay.check_schedule`, pure.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from uuid import UUID

from ledger.core.codec import Record
from ledger.core.decision_replay import check_history, definitions_of
from ledger.core.errors import JobNotFoundError
from ledger.core.events import JobEnqueued
from ledger.core.replay_findings import JobReplay
from ledger.core.schedules.events import ScheduleAdded
from ledger.core.schedules.replay import check_schedule
from ledger.core.schedules.state import schedule_stream_id
from ledger.core.values import JobDefinition
from ledger.core.workflow_replay import check_run, job_types, step_job_ids
from ledger.core.workflows.events import WorkflowEvent
from ledger.store.reads import ReadSnapshot
from ledger.store.store import Store
from ledger.store.streams import job_type_stream_id
from ledger.views.kinds import SCHEDULES
from ledger.views.schedules import schedule_of_row

Definitions = list[tuple[datetime, JobDefinition]]


def _job_type(records: list[Record]) -> str:
    first = records[0].event
    return first.request.job_type if isinstance(first, JobEnqueued) else ""


def check_job(store: Store, job_id: UUID) -> JobReplay:
    """Re-run the current decisions over one job's history (or, given a run's id, over the
    run's: :func:`check_run`)."""
    records = store.history(job_id)
    if not records:
        raise JobNotFoundError(f"no job {job_id}")
    if isinstance(records[0].event, WorkflowEvent):
        with store.read_snapshot() as snapshot:
            return _check_runs(snapshot, {job_id: records}, {})[0]
    if isinstance(records[0].event, ScheduleAdded):
        return check_schedule(records, store.state(SCHEDULES, records[0].event.schedule))
    definitions = definitions_of(store.history(job_type_stream_id(_job_type(records))))
    return check_history(records, definitions)


def check_all(
    store: Store, *, job_type: str | None = None, batch_size: int = 500
) -> Iterator[JobReplay]:
    """:func:`check_job` for every job (or every job of ``job_type``) with a queue row."""
    definitions: dict[str, Definitions] = {}
    query, params = "replay_job_ids", dict[str, object](limit=batch_size)
    if job_type is not None:
        query, params = "replay_job_ids_of_type", {**params, "job_type": job_type}
    with store.read_snapshot() as snapshot:
        after = snapshot.ids.key(UUID(int=0))
        while rows := snapshot.fetch(query, {**params, "after": after}):
            ids = [snapshot.ids.uuid(row["job_id"]) for row in rows]
            for records in snapshot.histories(ids).values():
                if not records:
                    continue  # a queue row without a history: `projections verify` reports it
                name = _job_type(records)
                if name not in definitions:
                    stream = job_type_stream_id(name)
                    definitions[name] = definitions_of(snapshot.histories([stream])[stream])
                yield check_history(records, definitions[name])
            after = snapshot.ids.key(ids[-1])
        if job_type is None:
            yield from _all_runs(snapshot, batch_size, definitions)
            yield from _all_schedules(snapshot)


def _all_runs(
    snapshot: ReadSnapshot, batch_size: int, definitions: dict[str, Definitions]
) -> Iterator[JobReplay]:
    """:func:`check_run` for every workflow run, a page of runs at a time."""
    after = snapshot.ids.key(UUID(int=0))
    params = {"limit": batch_size}
    while rows := snapshot.fetch("replay_run_ids", {**params, "after": after}):
        ids = [snapshot.ids.uuid(row["run_id"]) for row in rows]
        runs = {run_id: records for run_id, records in snapshot.histories(ids).items() if records}
        yield from _check_runs(snapshot, runs, definitions)
        after = snapshot.ids.key(ids[-1])


def _all_schedules(snapshot: ReadSnapshot) -> Iterator[JobReplay]:
    """:func:`check_schedule` for every schedule with a view row (a schedule's events
    without a row are reported by ``projections verify``)."""
    rows = {row["name"]: schedule_of_row(row) for row in snapshot.fetch("schedules_all")}
    streams = {schedule_stream_id(name): name for name in rows}
    for stream_id, records in snapshot.histories(list(streams)).items():
        if records:
            yield check_schedule(records, rows[streams[stream_id]])


def _check_runs(
    snapshot: ReadSnapshot,
    runs: dict[UUID, list[Record]],
    definitions: dict[str, Definitions],
) -> list[JobReplay]:
    """Check some runs, reading their step jobs' histories in one query and the definition
    streams not yet in ``definitions`` (which it fills)."""
    jobs = [job_id for records in runs.values() for job_id in step_job_ids(records)]
    histories = snapshot.histories(jobs)
    for name in {name for records in runs.values() for name in job_types(records)}:
        if name not in definitions:
            stream = job_type_stream_id(name)
            definitions[name] = definitions_of(snapshot.histories([stream])[stream])
    return [check_run(records, histories, definitions) for records in runs.values()]
