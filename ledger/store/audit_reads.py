"""Audit queries on the store: compose one SQL statement from named fragments, read one page.

The fragments live in ``ledger/store/sql/<backend>_audit.sql``; :func:`audit_sql` only chooses which
to join, and every value is a bound parameter. The shape keeps each typical question on one
index: an equality on type, org, worker, code or job, then position order (the keyset), with
the time bounds checked inside the type/org/worker indexes (their third column), so a page
stops after ``limit + 1`` matching rows instead of sorting every match.

A retry carries no failure code of its own, so "retries with code C" walks the failures with
code C (the code index, in position order) to each job's next row, which is that failure's
retry or dead letter. A code filter that wants retries *and* other rows takes the top
``limit + 1`` of each shape and then the top of both (``audit_union``): an ``OR`` would put
neither part on its index.

The read runs in one :meth:`~ledger.store.store.Store.read_snapshot` (a snapshot on
PostgreSQL, a WAL snapshot on SQLite), the same seam the rebuild and the runner use.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ledger.core.times import from_us, to_us
from ledger.store.ids import IdAdapter, id_adapter
from ledger.store.store import Store
from ledger.views.audit_query import AuditPage, AuditQuery, AuditRow, page

RETRY = "job_retry_scheduled"


def audit_sql(
    fragments: Mapping[str, str], backend: str, query: AuditQuery
) -> tuple[str, dict[str, Any]]:
    """The statement for one page of ``query`` and its parameters (``limit + 1`` rows), from
    ``backend``'s fragments."""
    ids = id_adapter(backend)
    events = sorted(set(query.events))
    if query.code is None or (events and RETRY not in events):
        return _one_shape(fragments, ids, query, events, retries=False)
    if events == [RETRY]:
        return _one_shape(fragments, ids, query, [], retries=True)
    # Retries and other events by code: the top rows of each shape, then the top of both
    # (each part stops at limit + 1 rows on its own index; an OR would defeat both).
    plain, params = _one_shape(fragments, ids, query, [e for e in events if e != RETRY])
    retries, more = _one_shape(fragments, ids, query, [], retries=True)
    params.update(more)  # the same names hold the same values in both parts
    union = fragments["audit_union"].format(first=plain, second=retries)
    return f"{union}\n{fragments[f'audit_union_order_{query.order}']}", params


def _one_shape(
    fragments: Mapping[str, str],
    ids: IdAdapter,
    query: AuditQuery,
    events: list[str],
    *,
    retries: bool = False,
) -> tuple[str, dict[str, Any]]:
    """One statement: the rows themselves, or (``retries``) the retries of the failures
    with ``query.code``, walked from the code index to each job's next row."""
    shape = "retries_" if retries else ""
    parts = [fragments["audit_query_retries" if retries else "audit_query_select"]]
    params: dict[str, Any] = {"limit": query.limit + 1}
    if query.status is not None:
        parts.append(fragments["audit_query_status"])
        params["status"] = query.status
    where: list[str] = []

    def add(name: str, key: str, value: Any) -> None:
        where.append(fragments[f"audit_filter_{name}"])
        params[key] = value

    if query.job is not None:
        add("job", "job", ids.key(query.job))
    if query.workflow is not None:
        add("workflow", "workflow", ids.key(query.workflow))
    if query.job_type is not None:
        add("job_type", "job_type", query.job_type)
    if query.code is not None:
        add("retries" if retries else "code", "code", query.code)
    if len(events) == 1:
        add("event", "event", events[0])
    elif events:
        add("events", "events", ids.values(events))
    if query.worker is not None:
        add("worker", "worker", query.worker)
    if query.org is not None:
        add("org", "org", query.org)
    if query.since is not None:
        add("since", "since", to_us(query.since))
    if query.until is not None:
        add("until", "until", to_us(query.until))
    after = query.after()
    if after is not None:
        where.append(fragments[f"audit_after_{shape}{query.order}"])
        params["after"] = after
    if where:
        parts.append("WHERE " + "\nAND ".join(f"({clause})" for clause in where))
    parts.append(fragments[f"audit_order_{shape}{query.order}"])
    return "\n".join(parts), params


def read_audit(store: Store, query: AuditQuery) -> list[AuditRow]:
    """Up to ``query.limit + 1`` rows of ``query`` (see :func:`page`), read in one snapshot."""
    query.check()
    with store.read_snapshot() as snapshot:
        sql, params = audit_sql(snapshot.queries, snapshot.ids.backend, query)
        return [_row(snapshot.ids, row) for row in snapshot.fetch_composed(sql, params)]


def read_page(store: Store, query: AuditQuery) -> AuditPage:
    """One page of ``query`` and the cursor of the next."""
    return page(read_audit(store, query), query)


def _row(ids: IdAdapter, row: Any) -> AuditRow:
    return AuditRow(
        position=int(row["position"]),
        job_id=ids.uuid(row["job_id"]),
        job_type=row["job_type"],
        org=row["org"],
        event=row["event"],
        worker_id=row["worker_id"],
        run_number=row["run_number"],
        attempt=row["attempt"],
        at=from_us(int(row["at"])),
        code=row["code"],
        workflow_run=None if row["workflow_run"] is None else ids.uuid(row["workflow_run"]),
        step_key=row["step_key"],
    )
