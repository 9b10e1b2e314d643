"""Retention's commands: set a rule, read the policy, plan and run a move to the archive.

A run pages through the hot queue view in enqueue order (a batch's rows are then neighbours
in every table and index ordered by position, which keeps a SQLite move's page writes few),
keeps the finished jobs past the most specific rule that are not held (their newest event
not yet in the tracked audit view, or the hot events table's newest event: decision 31), and
moves them a batch at a time
(:meth:`Store.move_to_archive <ledger.store.store.Store.move_to_archive>`), each batch's
``jobs_archived`` appended in the transaction that removes it. On PostgreSQL the unit is a
past month partition of the events table, moved whole when every job in it is eligible,
one event per month (:mod:`ledger.store.postgres.partitions`). A dry run moves and appends
nothing. Runs may overlap (two workers' services): a job moves at most once, since the hot
delete re-checks each job under the write lock, and the retention stream's versions refuse a
second append at the same version.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from typing import Any, NamedTuple
from uuid import UUID

import msgspec

from ledger.core.events import Event
from ledger.core.limits import check_name
from ledger.core.retention import (
    RETENTION_STREAM_ID,
    JobsArchived,
    RetentionPolicy,
    RetentionPolicySet,
    RetentionRule,
    check_after,
    check_status,
    cutoff_us,
    fold_policy,
    format_after,
)
from ledger.store.archive import RetentionCandidate, archive_unsupported
from ledger.store.store import Store
from ledger.views.catalog import AUDIT
from ledger.views.kinds import RETENTION

BATCH = 2_000
"""Jobs moved per batch (two short transactions each; the event names them all)."""
PAGE = 5_000
"""Hot queue rows read per page while choosing."""


class RetentionRun(msgspec.Struct, frozen=True):
    """What a run did (or, dry, would do)."""

    dry_run: bool
    archive: str | None
    policy_version: int
    eligible: int
    """Jobs past their rule and not held."""
    moved: int
    """Jobs moved (0 on a dry run)."""
    held: int
    """Jobs past their rule that must wait (their events not all in the audit view yet, or
    one holds the events table's newest id)."""
    changed: int
    """Jobs that changed between the choice and the move (kept hot)."""
    batches: int
    rows: dict[str, int]
    """Rows moved per table."""
    job_ids: list[UUID]
    """The jobs moved (a dry run: those that would be), at most ``list_limit``."""


HELD_BY_AUDIT = "the audit view has not applied its newest event yet"
HELD_BY_HEAD = "it holds the newest event of the hot events table"


class Held(NamedTuple):
    """A job past its rule that a run must leave for now, and why."""

    job: RetentionCandidate
    reason: str


class Choice(NamedTuple):
    eligible: list[RetentionCandidate]
    held: list[Held]


def policy_of(store: Store) -> RetentionPolicy:
    """The current policy: the fold of the retention stream."""
    with store.read_snapshot() as tables:
        records = tables.histories([RETENTION_STREAM_ID])[RETENTION_STREAM_ID]
    return fold_policy([record.event for record in records])


def policy_events(store: Store) -> list[tuple[int, Event]]:
    """The retention stream's events with their versions (policy changes and runs)."""
    with store.read_snapshot() as tables:
        records = tables.histories([RETENTION_STREAM_ID])[RETENTION_STREAM_ID]
    return [(record.originator_version, record.event) for record in records]


def set_rule(
    store: Store,
    now: datetime,
    *,
    job_type: str | None,
    status: str | None,
    after_s: int | None,
    actor: str | None = None,
) -> RetentionPolicy:
    """Set (or with ``after_s`` ``None`` drop) the rule for ``job_type`` / ``status``."""
    check_name(job_type, "job_type", optional=True)
    event = RetentionPolicySet(
        at=now,
        job_type=job_type,
        status=check_status(status),
        after_s=None if after_s is None else check_after(after_s),
        actor=actor,
    )
    with store.unit_of_work() as uow:
        uow.serialise_appends()  # the stream's version is read, then appended after
        uow.append([RETENTION.change(RETENTION_STREAM_ID, [event])])
    return policy_of(store)


def _candidates(store: Store, cutoff: int, page: int) -> Iterator[RetentionCandidate]:
    after = 0
    while True:
        rows = store.read("retention_candidates", {"after": after, "cutoff": cutoff, "limit": page})
        for row in rows:
            yield RetentionCandidate(
                store.ids.uuid(row["job_id"]),
                row["job_type"],
                row["status"],
                int(row["version"]),
                int(row["updated_at"]),
                int(row["last_position"] or 0),
            )
        if len(rows) < page:
            return
        after = int(rows[-1]["enqueue_seq"])


def choose(store: Store, policy: RetentionPolicy, now: datetime, page: int = PAGE) -> Choice:
    """The jobs past the most specific rule matching each, split into those a run may move
    now and those held (see the module docstring)."""
    shortest = policy.shortest_after_s
    if shortest is None:
        return Choice([], [])
    with store.read_snapshot() as tables:
        audit_position = tables.tracking().get(AUDIT.name, 0)
    head = int(store.read("retention_head")[0]["head"])
    eligible: list[RetentionCandidate] = []
    held: list[Held] = []
    for job in _candidates(store, cutoff_us(now, shortest), page):
        rule = policy.rule_for(job.job_type, job.status)
        if rule is None or job.updated_at_us >= cutoff_us(now, rule.after_s):
            continue
        if job.last_position > audit_position:
            held.append(Held(job, HELD_BY_AUDIT))
        elif job.last_position >= head:
            held.append(Held(job, HELD_BY_HEAD))
        else:
            eligible.append(job)
    return Choice(eligible, held)


def run_retention(
    store: Store,
    now: datetime,
    *,
    dry_run: bool = False,
    actor: str | None = None,
    batch: int = BATCH,
    list_limit: int = 1_000,
) -> RetentionRun:
    """One retention run at ``now`` (see the module docstring)."""
    archive = store.archive_where
    if archive is None and not dry_run:
        raise archive_unsupported(store.backend)
    if not dry_run:
        store.ensure_partitions(now)  # this month's jobs must find their partition
    policy = policy_of(store)
    choice = choose(store, policy, now)
    if dry_run or not choice.eligible:
        listed = [job.job_id for job in choice.eligible[:list_limit]]
        return RetentionRun(
            dry_run, archive, policy.version, len(choice.eligible), 0, len(choice.held), 0, 0,
            {}, listed,
        )  # fmt: skip
    moved: list[UUID] = []
    changed = 0
    batches = 0
    rows: dict[str, int] = {}

    def event_for(job_ids: list[UUID], moved_rows: dict[str, int]) -> Event:
        return JobsArchived(
            at=now,
            job_ids=job_ids,
            archive=archive or store.backend,
            moved=moved_rows,
            policy_version=policy.version,
            actor=actor,
        )

    if store.backend == "postgres":
        # Whole month partitions move (decision 31), each with its own event; a batch
        # size means nothing there.
        batch = max(batch, len(choice.eligible))
    for start in range(0, len(choice.eligible), batch):
        chunk = choice.eligible[start : start + batch]
        done = store.move_to_archive({job.job_id: job.version for job in chunk}, event_for, now=now)
        moved.extend(done.moved)
        changed += len(done.changed)
        batches += bool(done.moved)
        for table, count in done.rows.items():
            rows[table] = rows.get(table, 0) + count
    return RetentionRun(
        False, archive, policy.version, len(choice.eligible), len(moved), len(choice.held),
        changed, batches, rows, moved[:list_limit],
    )  # fmt: skip


def run_json(run: RetentionRun) -> dict[str, Any]:
    """A run as ``retention run --json`` prints it."""
    return {
        "dry_run": run.dry_run,
        "archive": run.archive,
        "policy_version": run.policy_version,
        "eligible": run.eligible,
        "moved": run.moved,
        "held": run.held,
        "changed": run.changed,
        "batches": run.batches,
        "rows": run.rows,
        "job_ids": [str(job_id) for job_id in run.job_ids],
    }


def rule_json(rule: RetentionRule) -> dict[str, Any]:
    return {
        "job_type": rule.job_type,
        "status": rule.status,
        "after_s": rule.after_s,
        "after": format_after(rule.after_s),
    }


def event_json(version: int, event: Event) -> dict[str, Any]:
    """One event of the retention stream (a rule set or dropped, a batch moved)."""
    shaped: dict[str, Any] = {"version": version, "event": event.name, "at": event.at.isoformat()}
    if isinstance(event, RetentionPolicySet):
        shaped.update(
            job_type=event.job_type, status=event.status, after_s=event.after_s, actor=event.actor
        )
    elif isinstance(event, JobsArchived):
        shaped.update(
            jobs=len(event.job_ids),
            archive=event.archive,
            moved=event.moved,
            policy_version=event.policy_version,
            actor=event.actor,
        )
    return shaped


def overview(store: Store, now: datetime, *, list_limit: int = 20) -> dict[str, Any]:
    """What ``retention show`` prints: the rules, what a run would move now and what it must
    leave (and why), on PostgreSQL each past month and whether it moves (all its streams
    eligible), the stream's events and the tables' sizes."""
    policy = policy_of(store)
    choice = choose(store, policy, now)
    return {
        "rules": [rule_json(rule) for rule in policy.rules],
        "policy_version": policy.version,
        "archive": store.archive_where,
        "eligible": len(choice.eligible),
        "held": len(choice.held),
        "held_jobs": [
            {
                "job_id": str(held.job.job_id),
                "job_type": held.job.job_type,
                "status": held.job.status,
                "reason": held.reason,
            }
            for held in choice.held[:list_limit]
        ],
        "partitions": [
            {
                "partition": unit.name,
                "streams": unit.streams,
                "eligible": unit.eligible,
                "moves": unit.streams > 0 and unit.eligible == unit.streams,
            }
            for unit in store.archive_units({j.job_id: j.version for j in choice.eligible}, now)
        ],
        "events": [event_json(version, event) for version, event in policy_events(store)],
        "sizes": store.table_sizes(),
    }
