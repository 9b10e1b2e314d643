"""Source polls through the ledger and a worker's registry (both backends): a directory
source's changes become the right sync jobs; a failing lister opens the source's breaker,
later polls are skipped with the reason until the cool-down passes; the views verify and
the histories replay."""

from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from ledger import FakeClock, Ledger
from ledger.core.source_diff import Listing, SourceAction
from ledger.core.source_polls.events import SOURCE_POLL_JOB_TYPE
from ledger.core.source_polls.state import BreakerState, PollResult
from ledger.testing import drain
from ledger.views.audit_query import AuditQuery
from ledger.views.kinds import SOURCE_POLLS
from tests.sources.conftest import SYNC_TYPE, docs_registry


def _write(path: Path, text: str, *, mtime_ns: int) -> None:
    path.write_text(text)
    os.utime(path, ns=(mtime_ns, mtime_ns))


def _poll_and_work(ledger: Ledger, registry: object) -> dict[str, object]:
    """Enqueue one poll job, work the queue (the poll, then its sync jobs); the poll's output."""
    import asyncio

    from ledger.runtime.handlers import Registry

    assert isinstance(registry, Registry)
    job_id = ledger.sources.enqueue_poll("docs")
    asyncio.run(drain(ledger, registry))
    job = ledger.get(job_id)
    assert job is not None and job.status == "succeeded", job
    assert isinstance(job.output, dict)
    return job.output


def test_directory_polls_enqueue_upserts_and_deletes(synced: Ledger, docs_dir: Path) -> None:
    """Files added, changed and removed across polls: each poll enqueues exactly the sync
    jobs of the changes, records source_polled with the counts, and verify/replay hold."""
    registry = docs_registry(docs_dir)
    _write(docs_dir / "a.md", "a", mtime_ns=1_000)
    _write(docs_dir / "b.md", "b", mtime_ns=1_000)
    first = _poll_and_work(synced, registry)
    assert first == {
        "source": "docs", "result": "polled", "upserted": 2, "unchanged": 0, "deleted": 0,
        "enqueued": 2, "already_live": 0,
    }  # fmt: skip
    uris = {row.uri for row in synced.sources.sync_state("docs")}
    assert uris == {(docs_dir / n).resolve().as_uri() for n in ("a.md", "b.md")}

    _write(docs_dir / "a.md", "a, edited", mtime_ns=2_000)  # changed
    (docs_dir / "b.md").unlink()  # removed
    _write(docs_dir / "c.md", "c", mtime_ns=1_000)  # added
    second = synced.sources.poll("docs", registry.sources()[0].list, registry.sources()[0].config)
    assert second.result is PollResult.POLLED and second.sync is not None
    actions = {Path(job.decision.uri).name: job.decision.action for job in second.sync.enqueued}
    assert actions == {
        "a.md": SourceAction.UPSERT, "c.md": SourceAction.UPSERT, "b.md": SourceAction.DELETE
    }  # fmt: skip
    jobs = synced.get_many([job.job_id for job in second.sync.enqueued])
    assert {job.job_type for job in jobs.values()} == {SYNC_TYPE}
    assert {job.subject.source_id for job in jobs.values() if job.subject} == {"docs"}

    # The same listing again while those jobs are live: nothing new, counted as already live.
    again = synced.sources.poll("docs", registry.sources()[0].list, registry.sources()[0].config)
    assert again.sync is not None and (len(again.sync.enqueued), len(again.sync.skipped)) == (0, 3)

    _poll_and_work(synced, registry)  # works the three jobs; nothing changed since
    quiet = _poll_and_work(synced, registry)
    assert (quiet["upserted"], quiet["unchanged"], quiet["deleted"]) == (0, 2, 0)
    assert {Path(r.uri).name for r in synced.sources.sync_state("docs")} == {"a.md", "c.md"}

    [state] = synced.store.states(SOURCE_POLLS)
    assert (state.polls, state.last_result, state.failures) == (5, PollResult.POLLED, 0)
    history = [r.event.name for r in synced.sources.history("docs")]
    assert history == ["source_polled"] * 5
    assert synced.projections().verify().clean
    checked = list(synced.replay_check_all())
    assert len(checked) >= 8 and not [c for c in checked if c.findings]


def test_failing_lister_opens_the_breaker_until_the_cooldown(
    synced: Ledger, docs_dir: Path, clock: FakeClock
) -> None:
    """A missing directory fails each poll; the third opens the breaker; polls are then
    skipped with the reason until the cool-down passes; a poll after it runs (half-open),
    and once the directory is back a success closes the breaker."""
    gone = docs_dir / "missing"
    registry = docs_registry(gone, threshold=3, cooldown_s=60)
    for n in (1, 2, 3):
        output = _poll_and_work(synced, registry)
        assert (output["result"], output["failures"]) == ("failed", n)
        assert output["code"] == "FileNotFoundError"
        clock.advance(5)
    state = synced.store.state(SOURCE_POLLS, "docs")
    assert state is not None and state.breaker(clock.now()) is BreakerState.OPEN
    opened_at = state.breaker_until

    skipped = _poll_and_work(synced, registry)
    assert skipped["result"] == "skipped" and skipped["code"] == "source.breaker_open"
    assert "3 consecutive failed polls" in str(skipped["reason"])
    assert "does not exist" in str(skipped["reason"])

    clock.advance(60)  # past the cool-down: the next poll probes, fails, reopens at once
    probe = _poll_and_work(synced, registry)
    assert (probe["result"], probe["failures"]) == ("failed", 4)
    state = synced.store.state(SOURCE_POLLS, "docs")
    assert state is not None and state.breaker_until is not None and opened_at is not None
    assert state.breaker_until > opened_at and state.breaker(clock.now()) is BreakerState.OPEN

    gone.mkdir()
    (gone / "x.md").write_text("x")
    clock.advance(61)
    healed = _poll_and_work(synced, registry)
    assert (healed["result"], healed["upserted"]) == ("polled", 1)
    state = synced.store.state(SOURCE_POLLS, "docs")
    assert state is not None and state.breaker(clock.now()) is BreakerState.CLOSED
    names = [r.event.name for r in synced.sources.history("docs")]
    assert names == [
        "source_poll_failed", "source_poll_failed", "source_poll_failed",
        "source_breaker_opened", "source_poll_skipped", "source_poll_failed",
        "source_breaker_opened", "source_polled",
    ]  # fmt: skip
    assert len(synced.jobs(job_type=SOURCE_POLL_JOB_TYPE).jobs) == 6
    page = synced.audit(AuditQuery(events=("source_poll_skipped", "source_breaker_opened")))
    assert [(r.event, r.job_type, r.code) for r in page.rows] == [
        ("source_breaker_opened", SOURCE_POLL_JOB_TYPE, None),
        ("source_poll_skipped", SOURCE_POLL_JOB_TYPE, "source.breaker_open"),
        ("source_breaker_opened", SOURCE_POLL_JOB_TYPE, None),
    ]
    assert synced.projections().verify().clean


def test_two_polls_at_once_fold_the_stream_in_turn(synced: Ledger, docs_dir: Path) -> None:
    """Two threads poll one source together (released by a barrier): both are recorded, the
    files get one sync job each, and the later poll counts them as already live."""
    registry = docs_registry(docs_dir)
    for name in ("a.md", "b.md", "c.md"):
        _write(docs_dir / name, name, mtime_ns=1_000)
    spec = registry.sources()[0]
    barrier = threading.Barrier(2)

    def listed() -> Listing:
        found = spec.list()
        barrier.wait(timeout=10)  # both listings are taken before either poll records
        return found

    with ThreadPoolExecutor(2) as pool:
        polls = list(pool.map(lambda _: synced.sources.poll("docs", listed, spec.config), [0, 1]))
    counts = sorted((len(p.sync.enqueued), len(p.sync.skipped)) for p in polls if p.sync)
    assert counts == [(0, 3), (3, 0)]
    assert [r.event.name for r in synced.sources.history("docs")] == ["source_polled"] * 2
    assert synced.counts() == {"pending": 3}
    assert synced.projections().verify().clean
