"""``Ledger.audit`` on both backends: every filter alone and combined, order, paging, paging
while events arrive, the current-status filter, and retries matched by their failure's code."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from audit_helpers import Scenario, fields, matches, page_through, read_all

from ledger import AuditQuery, Failure, FailureKind, Ledger


def _queries(s: Scenario, some_job: Any) -> list[AuditQuery]:
    day = timedelta(days=1)
    return [
        AuditQuery(job=some_job),
        AuditQuery(job_type="report"),
        AuditQuery(events=("job_dead_lettered",)),
        AuditQuery(events=("job_failed", "job_retry_scheduled")),
        AuditQuery(worker="w2"),
        AuditQuery(org="beta"),
        AuditQuery(status="dead"),
        AuditQuery(code="E1"),
        AuditQuery(since=s.start + 3 * day),
        AuditQuery(until=s.start + 2 * day),
        AuditQuery(since=s.start + 2 * day, until=s.start + 4 * day),
        AuditQuery(events=("job_dead_lettered",), job_type="report", since=s.start + 5 * day),
        AuditQuery(worker="w2", events=("job_leased",)),
        AuditQuery(events=("job_retry_scheduled",), code="E1"),
        AuditQuery(events=("job_failed", "job_dead_lettered"), code="E1"),
        AuditQuery(events=("job_retry_scheduled", "job_failed"), code="E2"),
        AuditQuery(org="beta", since=s.start + day, until=s.start + 3 * day),
        AuditQuery(org="beta", job_type="mail", status="succeeded", worker="w1"),
        AuditQuery(job_type="report", status="leased"),
        AuditQuery(events=("job_retry_scheduled",), code="E2", org="beta", status="succeeded"),
        AuditQuery(events=("job_retry_scheduled",), code="E1", since=s.start + 3 * day),
        AuditQuery(org="acme", code="E1"),  # nothing: acme never fails
    ]


def test_each_filter_alone_and_combined_returns_exactly_the_matching_rows(
    shared: Scenario,
) -> None:
    """Every filter, alone and in combination, returns exactly the rows of the whole history
    whose fields match (judged row by row on an unfiltered read), newest first."""
    with Ledger.open(shared.url, clock=shared.clock) as ledger:
        everything = read_all(ledger, AuditQuery())
        statuses = {r.job_id: str(ledger.get(r.job_id).status) for r in everything}  # type: ignore[union-attr]
        queries = _queries(shared, everything[-1].job_id)
        for query in queries:
            expected = [r for r in everything if matches(r, query, statuses)]
            got = read_all(ledger, query)
            assert got == expected, query
        empty = [q for q in queries if not read_all(ledger, q)]
        head = ledger.store.head_position()
    assert empty == [AuditQuery(org="acme", code="E1")]  # the oracle is not vacuous
    assert len(everything) == head - 2  # two definition events


def test_known_answers(shared: Scenario) -> None:
    """Hand-counted answers: 8 + 3 dead letters (E3 daily, E1 on report retries every third
    day), 4 retries with E1 and 4 with E2, the vanished lease, 18 jobs."""
    with Ledger.open(shared.url, clock=shared.clock) as ledger:
        dead = read_all(ledger, AuditQuery(events=("job_dead_lettered",)))
        assert {r.code for r in dead} == {"E1", "E3"} and len(dead) == 11
        e1 = read_all(ledger, AuditQuery(events=("job_retry_scheduled",), code="E1"))
        e2 = read_all(ledger, AuditQuery(events=("job_retry_scheduled",), code="E2"))
        assert len(e1) == len(e2) == 4
        assert {r.code for r in e1} == {"E1"} and {r.job_type for r in e1} == {"mail"}
        leased_now = read_all(ledger, AuditQuery(status="leased", events=("job_leased",)))
        assert [r.job_id for r in leased_now] == [shared.vanished_job]
        assert leased_now[0].worker_id == "w2"
        enqueued = read_all(ledger, AuditQuery(events=("job_enqueued",)))
        assert len(enqueued) == 8 * 3 + 3 + 2


def test_order_newest_and_oldest_first(shared: Scenario) -> None:
    """Newest first is strictly descending by position; oldest first is its exact reverse."""
    with Ledger.open(shared.url) as ledger:
        for query in (AuditQuery(), AuditQuery(org="beta"), AuditQuery(code="E1")):
            newest = read_all(ledger, query)
            oldest = read_all(ledger, AuditQuery(**{**fields(query), "order": "oldest"}))
            positions = [r.position for r in newest]
            assert positions == sorted(positions, reverse=True) and len(set(positions)) == len(
                positions
            )
            assert oldest == newest[::-1]


@pytest.mark.parametrize("order", ["newest", "oldest"])
@pytest.mark.parametrize("limit", [1, 7])
def test_paging_through_every_page_equals_one_unpaged_read(
    shared: Scenario, order: Any, limit: int
) -> None:
    """Following the cursors page by page gives the unpaged read: no repeat, no gap."""
    with Ledger.open(shared.url) as ledger:
        for query in (
            AuditQuery(order=order, limit=limit),
            AuditQuery(order=order, limit=limit, worker="w1", since=shared.start),
            AuditQuery(order=order, limit=limit, code="E2"),
            AuditQuery(order=order, limit=limit, code="E1", events=("job_retry_scheduled",)),
        ):
            assert page_through(ledger, query) == read_all(ledger, query)


def test_last_page_has_no_cursor_and_a_full_last_page_is_not_followed_by_an_empty_one(
    shared: Scenario,
) -> None:
    """A page with a next cursor is full, and the cursor always leads to at least one row."""
    with Ledger.open(shared.url) as ledger:
        total = len(read_all(ledger, AuditQuery(org="acme")))
        page = ledger.audit(AuditQuery(org="acme", limit=total))
        assert len(page.rows) == total and page.next_cursor is None
        page = ledger.audit(AuditQuery(org="acme", limit=total - 1))
        assert page.next_cursor is not None
        rest = ledger.audit(AuditQuery(org="acme", limit=total - 1, cursor=page.next_cursor))
        assert len(rest.rows) == 1 and rest.next_cursor is None


def _append_more(ledger: Ledger) -> None:
    """New events: jobs enqueued, leased, failed and succeeded after the first page."""
    for i in range(3):
        ledger.enqueue("mail", {"kind": "ok", "i": i}, org="beta")
    for job in ledger.claim("w9", limit=10):
        assert job.lease is not None
        failure = Failure(kind=FailureKind.RETRYABLE, code="E1", message="m")
        ledger.fail(job.lease, failure) if job.attempt == 1 else ledger.succeed(job.lease)


def test_newest_first_paging_is_stable_while_events_arrive(scenario: Scenario) -> None:
    """Pages after the first show exactly the rows that followed it when it was read, though
    new events (of the same org, with the same code) are appended between every two pages."""
    query = AuditQuery(org="beta", limit=4)
    with Ledger.open(scenario.url, clock=scenario.clock) as ledger:
        before = read_all(ledger, query)
        page = ledger.audit(query)
        rows = list(page.rows)
        while page.next_cursor is not None:
            scenario.clock.advance(60)
            _append_more(ledger)
            page = ledger.audit(AuditQuery(org="beta", limit=4, cursor=page.next_cursor))
            rows += page.rows
        after = read_all(ledger, query)
    assert rows == before
    assert len(after) > len(before)  # new rows did arrive, and appear on a new first page


def test_oldest_first_paging_while_events_arrive_reaches_them_once(scenario: Scenario) -> None:
    """Oldest first, events appended between pages appear once, at the end, none skipped."""
    query = AuditQuery(org="beta", limit=5, order="oldest")
    with Ledger.open(scenario.url, clock=scenario.clock) as ledger:
        before = read_all(ledger, query)
        page = ledger.audit(query)
        rows = list(page.rows)
        appended = 0
        while page.next_cursor is not None:
            if appended < 2:
                _append_more(ledger)
                appended += 1
            page = ledger.audit(AuditQuery(**{**fields(query), "cursor": page.next_cursor}))
            rows += page.rows
        after = read_all(ledger, query)
    assert rows == after
    assert rows[: len(before)] == before and len(after) > len(before)


def test_status_filter_follows_the_jobs_current_status(scenario: Scenario) -> None:
    """``status`` is the job's status now: requeueing a dead job moves its whole trail from
    ``dead`` to ``pending``."""
    with Ledger.open(scenario.url, clock=scenario.clock) as ledger:
        dead_rows = read_all(ledger, AuditQuery(status="dead"))
        job_id = dead_rows[0].job_id
        trail = read_all(ledger, AuditQuery(job=job_id))
        assert {r.job_id for r in dead_rows} >= {job_id}
        ledger.requeue(job_id)
        pending = read_all(ledger, AuditQuery(status="pending", job=job_id))
        assert [r.event for r in pending] == ["job_requeued"] + [r.event for r in trail]
        assert read_all(ledger, AuditQuery(status="dead", job=job_id)) == []


def test_a_query_sees_events_committed_before_it_without_a_separate_catch_up(
    scenario: Scenario,
) -> None:
    """``Ledger.audit`` catches the view up first: an event just appended is on page one."""
    with Ledger.open(scenario.url, clock=scenario.clock) as ledger:
        job_id = ledger.enqueue("report", {"kind": "ok"}, org="zeta").job_id
        [row] = ledger.audit(AuditQuery(org="zeta")).rows
        assert (row.job_id, row.event, row.org) == (job_id, "job_enqueued", "zeta")
        stale = ledger.enqueue("report", {"kind": "ok"}, org="zeta").job_id
        rows = ledger.audit(AuditQuery(org="zeta"), catch_up=False).rows
        assert stale not in {r.job_id for r in rows}
