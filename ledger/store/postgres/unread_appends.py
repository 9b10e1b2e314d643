"""Appending to jobs whose state the caller already holds, in one statement and one round trip.

A unit of work reads and locks each job before it appends (``queue_lock``), then writes its
events, its view row and the wake-up, and commits: five statements and four round trips, about
0.65 ms of this process's CPU however few jobs it carries (bench/README.md, "Handler starts
without a read"). A pool that records its handlers' starts writes small
groups often, and it already holds each job's state: the one its claim returned. So, when
the fold of the new events touches nothing but the jobs' own rows (no view of another kind,
no policy trigger, no wake-up), the events and the rows go out in ``jobs_append_if_unchanged``,
a single statement run outside any transaction of ours, which writes a job only if its stream
is still at the version the caller folded from. A job that moved on meanwhile (a heartbeat, a
cancel) is not written, and the caller decides again on what the database holds; an append
that touches more goes through the unit of work whole. An in-lease report (the handler's start,
a stage, progress) writes its events and leaves the row behind (:mod:`ledger.views.queue_lag`):
the next write of the row catches it up.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any
from uuid import UUID

import msgspec
import psycopg
from psycopg.rows import DictRow

from ledger.core.codec import EventCodec
from ledger.core.events import JobEvent
from ledger.core.policy import Policy, ask, trigger_types
from ledger.core.state import JobState
from ledger.store.fold import AppendFold
from ledger.store.ids import IdAdapter
from ledger.views.kinds import JOBS
from ledger.views.queue import queue_update_row
from ledger.views.queue_lag import in_lease_only

_json_encoder = msgspec.json.Encoder()


def rows_only_fold(
    changes: Sequence[tuple[JobState, Sequence[JobEvent]]], policies: Sequence[Policy]
) -> AppendFold | None:
    """The fold of ``changes`` from the states given, or ``None`` when it changes more than
    the jobs' own rows (a view of another kind, a wake-up, an event some policy must see:
    :func:`ledger.core.policy.ask`, pure and cheap): then only a unit
    of work may append it."""
    known = {state.job_id: state for state, _ in changes}
    fold = AppendFold(
        known.get, triggers=[] if policies else None, trigger_types=trigger_types(policies)
    )
    fold.fold([JOBS.changes([(state.job_id, events) for state, events in changes])])
    touches_more = (
        fold.view_writes
        or ask(policies, fold.triggers or [])
        or fold.changed
        or fold.runs
        or fold.makes_claimable
        or fold.cancels_leased
    )
    return None if touches_more else fold


def statement_parameters(
    fold: AppendFold,
    known: Mapping[UUID, JobState],
    codec: EventCodec,
    ids: IdAdapter,
    channel: str,
) -> dict[str, Any]:
    """``jobs_append_if_unchanged``'s parameters for ``fold``, folded from the ``known``
    states. A job whose change is an in-lease report (:func:`~ledger.views.queue_lag.in_lease_only`)
    sends its expected version alone: its events go out, its row stays behind."""
    rows: list[dict[str, Any]] = []
    for job_id, state in fold.states.items():
        before = known[job_id]
        if in_lease_only(before, state):
            rows.append({"job_id": ids.key(job_id), "expected": before.version})
            continue
        row = queue_update_row(state, ids.key(job_id))
        row["expected"] = before.version  # the state blob travels as base64, msgspec's way
        rows.append(row)
    events = []
    for originator_id, version, event in fold.records:
        topic, blob = codec.encode(event)
        events.append(
            {
                "originator_id": originator_id,
                "originator_version": version,
                "topic": topic,
                "state": blob,
            }
        )
    return {
        "job_ids": [ids.key(job_id) for job_id in fold.states],
        "rows": _json_encoder.encode(rows).decode(),
        "events": _json_encoder.encode(events).decode(),
        "channel": channel,
    }


_QUEUE_REFERENCE = "jl_queue AS q"
_in_month: dict[tuple[str, str], str] = {}


def in_month(sql: str, partition: str) -> str:
    """The statement with the job view's month partition ``partition`` in place of the
    parent (:mod:`ledger.store.postgres.queue_months`): it then opens that month alone."""
    key = (sql, partition)
    text = _in_month.get(key)
    if text is None:
        # Both references, the lock's and the update's; anything else is a statement this
        # function does not know, and naming a partition in it would be a guess.
        assert sql.count(_QUEUE_REFERENCE) == 2, "the statement names jl_queue as expected"
        text = _in_month[key] = sql.replace(_QUEUE_REFERENCE, f"{partition} AS q")
    return text


def run(cursor: psycopg.Cursor[DictRow], sql: str, parameters: dict[str, Any]) -> set[UUID]:
    """Run the statement on an autocommit connection's cursor; the job ids written."""
    cursor.execute(sql, parameters, prepare=True)
    return {row["job_id"] for row in cursor.fetchall()}
