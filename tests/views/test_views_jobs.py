"""``jobledger jobs`` and ``Ledger.jobs``: the current jobs, filtered and keyset-paged."""

from __future__ import annotations

import json

import pytest
from views_helpers import define_types, enqueue, invoke, work_a_mix

from ledger import FakeClock, InvalidRequestError, JobStatus, Ledger


def _ids(page_jobs: list) -> list:  # type: ignore[type-arg]
    return [job.state.job_id for job in page_jobs]


def test_jobs_filters_by_status_type_and_org(ledger: Ledger, clock: FakeClock) -> None:
    """Each filter, and their combination, keeps exactly the matching jobs, newest first."""
    define_types(ledger)
    jobs = work_a_mix(ledger, clock, "one")
    newest_first = list(reversed(jobs.values()))
    assert _ids(ledger.jobs().jobs) == newest_first
    # "retried" waits out its backoff: pending too.
    assert _ids(ledger.jobs(statuses=[JobStatus.PENDING]).jobs) == [
        jobs["pending"],
        jobs["retried"],
    ]
    for status in (JobStatus.LEASED, JobStatus.SUCCEEDED, JobStatus.DEAD, JobStatus.CANCELLED):
        assert _ids(ledger.jobs(statuses=[status]).jobs) == [jobs[status.value]]
    assert _ids(ledger.jobs(job_type="u").jobs) == [jobs["leased"], jobs["dead"]]
    assert _ids(ledger.jobs(org="acme").jobs) == [
        jobs["pending"],
        jobs["retried"],
        jobs["succeeded"],
    ]
    both = ledger.jobs(statuses=[JobStatus.PENDING, JobStatus.SUCCEEDED], job_type="t", org="acme")
    assert _ids(both.jobs) == [jobs["pending"], jobs["retried"], jobs["succeeded"]]
    assert ledger.jobs(job_type="nope").jobs == []


def test_jobs_pages_with_a_cursor_that_keeps_its_place(ledger: Ledger) -> None:
    """Pages of 3 cover every job once; jobs enqueued between pages do not shift the next."""
    ledger.define("t")
    ids = [enqueue(ledger) for _ in range(7)]
    first = ledger.jobs(limit=3)
    assert _ids(first.jobs) == ids[::-1][:3]
    assert first.next_cursor == first.jobs[-1].enqueue_seq
    enqueue(ledger)  # newer than every page: an offset would now repeat a job
    second = ledger.jobs(limit=3, cursor=first.next_cursor)
    assert _ids(second.jobs) == ids[::-1][3:6]
    third = ledger.jobs(limit=3, cursor=second.next_cursor)
    assert (_ids(third.jobs), third.next_cursor) == ([ids[0]], None)
    exact = ledger.jobs(limit=7, cursor=first.jobs[0].enqueue_seq + 1)
    assert (len(exact.jobs), exact.next_cursor) == (7, None)


def test_jobs_refuses_a_bad_page_request(sqlite_url: str) -> None:
    """A limit or cursor below 1, or an unknown status, is request.invalid (checked before
    any read, so one backend is enough)."""
    with Ledger.open(sqlite_url) as ledger:
        for bad in ({"limit": 0}, {"cursor": 0}, {"statuses": ["sleeping"]}):
            with pytest.raises(InvalidRequestError):
                ledger.jobs(**bad)


def test_jobs_cli_prints_a_table_and_json_pages(db_url: str, clock: FakeClock) -> None:
    """The table shows id, type, org, status, run/attempt, worker and lease end while leased,
    and the error code; --json pages parse back and --cursor continues them."""
    with Ledger.open(db_url, clock=clock) as ledger:
        define_types(ledger)
        jobs = work_a_mix(ledger, clock, "cli")
        leased = ledger.get(jobs["leased"])
    assert leased is not None and leased.lease_expires_at is not None

    text = invoke(db_url, "jobs")
    assert text.exit_code == 0, text.stderr
    lines = text.stdout.splitlines()
    assert lines[0].split() == [
        "ID",
        "TYPE",
        "ORG",
        "STATUS",
        "RUN/ATT",
        "RUN",
        "AT",
        "WORKER",
        "LEASE",
        "END",
        "ERROR",
    ]
    rows = {line.split()[0]: line.split() for line in lines[1:]}
    assert rows[str(jobs["leased"])][1:5] == ["u", "-", "leased", "1/1"]
    assert rows[str(jobs["leased"])][6] == "w1"
    assert rows[str(jobs["leased"])][7].startswith(leased.lease_expires_at.strftime("%Y-%m-%dT"))
    assert rows[str(jobs["dead"])][3:] == [
        "dead",
        "1/1",
        rows[str(jobs["dead"])][5],
        "-",
        "-",
        "input.bad",
    ]
    assert rows[str(jobs["retried"])][-1] == "smtp.busy"

    page = json.loads(invoke(db_url, "jobs", "--limit", "4", "--json").stdout)
    assert [job["job_id"] for job in page["jobs"]] == [str(i) for i in reversed(jobs.values())][:4]
    assert page["at"] is None and page["jobs"][0]["payload"] == {"tag": "cli", "name": "pending"}
    rest = invoke(db_url, "jobs", "--limit", "4", "--cursor", str(page["next_cursor"]), "--json")
    rest_page = json.loads(rest.stdout)
    assert [job["job_id"] for job in rest_page["jobs"]] == [
        str(jobs["retried"]),
        str(jobs["succeeded"]),
    ]
    assert rest_page["next_cursor"] is None

    filtered = json.loads(invoke(db_url, "jobs", "--status", "dead", "--json").stdout)
    assert [job["job_id"] for job in filtered["jobs"]] == [str(jobs["dead"])]


@pytest.mark.parametrize(
    "args",
    [
        ["--status", "sleeping"],
        ["--limit", "0"],
        ["--cursor", "0"],
        ["--at", "yesterday"],
        ["--at", "2026-01-01T00:00:00"],
    ],
)
def test_jobs_cli_bad_options_are_usage_errors(sqlite_url: str, args: list[str]) -> None:
    """A bad status, limit, cursor or time is one error line with exit 2."""
    result = invoke(sqlite_url, "jobs", *args)
    assert result.exit_code == 2, result.stdout
    assert result.stdout == ""
    assert result.stderr.startswith("error: ") and len(result.stderr.splitlines()) == 1
