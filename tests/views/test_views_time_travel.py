"""``jobledger jobs --at`` and ``Ledger.jobs_at``: the queue as it was, folded from history."""

from __future__ import annotations

import json
from datetime import timedelta

from views_helpers import RETRYABLE, define_types, enqueue, invoke, work_a_mix

from ledger import FakeClock, JobStatus, Ledger
from ledger.store.queue_reads import jobs_at
from ledger.views.job_pages import JobQuery

QUERIES: list[dict[str, object]] = [
    {},
    {"statuses": [JobStatus.PENDING]},
    {"statuses": [JobStatus.LEASED, JobStatus.DEAD]},
    {"job_type": "u"},
    {"org": "acme", "statuses": [JobStatus.SUCCEEDED, JobStatus.PENDING]},
    {"limit": 2},
]


def _more_work(ledger: Ledger, clock: FakeClock, jobs: dict) -> None:  # type: ignore[type-arg]
    """After the snapshot: every earlier job changes, and new jobs arrive."""
    clock.advance(5)
    enqueue(ledger, "t", org="acme")
    enqueue(ledger, "u")
    ledger.requeue(jobs["dead"])
    ledger.requeue(jobs["cancelled"])
    clock.advance(60)  # the retry is due
    for state in ledger.claim("w2", limit=20):
        assert state.lease is not None
        ledger.fail(state.lease, RETRYABLE)
    leased = ledger.get(jobs["leased"])
    assert leased is not None
    ledger.cancel(leased.job_id)


def test_jobs_at_equals_the_snapshot_taken_at_that_time(ledger: Ledger, clock: FakeClock) -> None:
    """jobs_at(T), for every filter and page, equals jobs() as it was read at T, though every
    job changed and new jobs were enqueued after T."""
    define_types(ledger)
    jobs = work_a_mix(ledger, clock, "snapshot")
    moment = clock.now()
    snapshots = {index: ledger.jobs(**query) for index, query in enumerate(QUERIES)}  # type: ignore[arg-type]
    second_page = ledger.jobs(limit=2, cursor=snapshots[5].next_cursor)
    _more_work(ledger, clock, jobs)
    assert ledger.jobs().jobs != snapshots[0].jobs  # the present differs

    for index, query in enumerate(QUERIES):
        assert ledger.jobs_at(moment, **query) == snapshots[index], query  # type: ignore[arg-type]
    assert ledger.jobs_at(moment, limit=2, cursor=snapshots[5].next_cursor) == second_page
    assert len(ledger.jobs_at(clock.now()).jobs) == 8
    assert ledger.jobs_at(moment - timedelta(days=1)).jobs == []


def test_jobs_at_reads_the_history_in_batches(ledger: Ledger, clock: FakeClock) -> None:
    """Folding two events per read gives the same page as one read of everything."""
    define_types(ledger)
    work_a_mix(ledger, clock, "batches")
    moment = clock.now() - timedelta(seconds=3)
    seen: list[tuple[int, int]] = []
    small = jobs_at(
        ledger.store, moment, JobQuery(), batch=2, progress=lambda p, h: seen.append((p, h))
    )
    assert small == jobs_at(ledger.store, moment, JobQuery())
    head = ledger.store.head_position()
    assert len(seen) >= head // 2 and seen[-1] == (head, head)


def test_jobs_at_agrees_with_state_at_when_stamps_interleave(db_url: str) -> None:
    """An event stamped before one appended ahead of it still counts by its own time, and a
    job's history stops at its first event later than T, as in Ledger.state_at."""
    late, early = FakeClock(), FakeClock()
    late.advance(600)  # two writers whose clocks disagree by ten minutes
    with Ledger.open(db_url, clock=late) as ahead, Ledger.open(db_url, clock=early) as behind:
        define_types(ahead)
        first = enqueue(ahead)  # position before `second`, stamped later
        second = enqueue(behind)
        [claimed] = ahead.claim("w1")  # stamped at +600 s
        assert claimed.job_id == second and claimed.lease is not None  # run_at is earlier
        behind.heartbeat(claimed.lease)  # appended after the claim, stamped earlier
        moment = early.now() + timedelta(seconds=1)
        page = behind.jobs_at(moment)
        assert [job.state for job in page.jobs] == [behind.state_at(second, at=moment)]
        assert page.jobs[0].state.status is JobStatus.PENDING  # the early heartbeat is not in
        assert behind.state_at(first, at=moment) is None
        later = late.now()
        states = {job.state.job_id: job.state for job in behind.jobs_at(later).jobs}
        assert states == {i: behind.state_at(i, at=later) for i in (first, second)}
        assert (states[second].status, states[second].version) == (JobStatus.LEASED, 3)


def test_jobs_at_cli_matches_the_json_snapshot(db_url: str, clock: FakeClock) -> None:
    """`jobs --at T --json` prints what `jobs --json` printed at T; an age works too."""
    with Ledger.open(db_url, clock=clock) as ledger:
        define_types(ledger)
        jobs = work_a_mix(ledger, clock, "cli")
        moment = clock.now()
        before = json.loads(invoke(db_url, "jobs", "--json", "--status", "pending").stdout)
        _more_work(ledger, clock, jobs)
    stamp = moment.isoformat()
    result = invoke(db_url, "jobs", "--at", stamp, "--json", "--status", "pending")
    assert result.exit_code == 0, result.stderr
    after = json.loads(result.stdout)
    assert after.pop("at") == stamp.replace("+00:00", "Z")
    before.pop("at")
    assert after == before and len(before["jobs"]) == 2

    text = invoke(db_url, "jobs", "--at", "1000d")
    assert text.exit_code == 0, text.stderr
    assert text.stdout.splitlines()[1:] == []
    assert text.stderr.startswith("as at ")
