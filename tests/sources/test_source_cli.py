"""``jobledger sources`` and ``sources poll`` on both backends: the last poll, its result,
the breaker and the skip reason, in text and JSON; a poll enqueued as a job or run here."""

from __future__ import annotations

import json
import sys
import textwrap
import uuid
from pathlib import Path

import pytest

from ledger import FakeClock, Ledger
from ledger.core.source_diff import Listing
from ledger.core.source_polls.decide import BreakerPolicy, SourceConfig
from ledger.core.source_polls.events import SOURCE_POLL_JOB_TYPE
from tests.cli.cli_helpers import event_count, invoke
from tests.sources.conftest import SYNC_TYPE


def _down() -> Listing:
    raise ConnectionError("listing endpoint refused\nsecond line is dropped")


def test_sources_shows_last_poll_breaker_and_skip_reason(
    synced: Ledger, db_url: str, clock: FakeClock
) -> None:
    """Two sources: one polled fine, one whose breaker opened and whose next poll was
    skipped; the list shows each one's result, counts or error, breaker and reason."""
    synced.sources.poll("wiki", lambda: [("w1", "r1")], SourceConfig(job_type=SYNC_TYPE))
    config = SourceConfig(job_type=SYNC_TYPE, breaker=BreakerPolicy(2, 3600))
    for _ in range(3):  # fail, fail (opens), skipped
        synced.sources.poll("api", _down, config)
    result = invoke(db_url, "sources", "--json")
    assert result.exit_code == 0, result.output
    api, wiki = json.loads(result.stdout)
    assert (api["source_id"], api["uris"], api["jobs"]) == ("api", 0, {})
    poll = api["poll"]
    assert (poll["result"], poll["failures"], poll["polls"]) == ("skipped", 2, 3)
    assert poll["error"] == "listing endpoint refused"
    assert poll["error_code"] == "ConnectionError" and poll["skip_code"] == "source.breaker_open"
    assert "2 consecutive failed polls" in poll["skip_reason"]
    assert poll["breaker_until"].startswith("2026-01-01T01:00:00")
    # The CLI reads with the system clock, past the fake clock's cool-down.
    assert poll["breaker"] == "half_open"
    assert (wiki["jobs"], wiki["poll"]["result"]) == ({"pending": 1}, "polled")
    assert wiki["poll"]["counts"] == {
        "upserted": 1, "unchanged": 0, "deleted": 0, "enqueued": 1, "already_live": 0
    }  # fmt: skip

    text = invoke(db_url, "sources")
    assert text.exit_code == 0, text.output
    api_line, wiki_line = text.stdout.splitlines()[1:]
    assert api_line.startswith("api") and "skipped" in api_line and "half_open" in api_line
    assert "breaker open after 2 consecutive failed polls" in api_line
    assert "polled" in wiki_line and "+1 =0 -0, enqueued 1" in wiki_line
    for check in (("projections", "verify"), ("replay", "--check", "--all")):
        held = invoke(db_url, *check)
        assert held.exit_code == 0, (check, held.output)


@pytest.fixture
def app_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """An importable app (in the current directory) registering source ``docs`` over a
    directory with one file; its ``module:attr``."""
    name = f"sources_app_{uuid.uuid4().hex}"
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.md").write_text("a")
    (tmp_path / f"{name}.py").write_text(
        textwrap.dedent(f"""
        from ledger.runtime.handlers import Registry
        from ledger.runtime.source_listers import directory_lister

        registry = Registry()
        lister = directory_lister({str(tmp_path / "docs")!r})
        registry.source("docs", lister, job_type="{SYNC_TYPE}")
        """)
    )
    monkeypatch.chdir(tmp_path)
    yield f"{name}:registry"
    sys.modules.pop(name, None)


def test_sources_poll_enqueues_or_runs_now(synced: Ledger, db_url: str, app_module: str) -> None:
    """``sources poll`` enqueues a jobledger.source_poll job; ``--run-now`` lists, diffs and
    enqueues the sync jobs in the CLI process; bad arguments exit 2 and append nothing."""
    queued = invoke(db_url, "sources", "poll", "docs", "--json")
    assert queued.exit_code == 0, queued.output
    job = synced.get(uuid.UUID(json.loads(queued.stdout)["job_id"]))
    assert job is not None and job.job_type == SOURCE_POLL_JOB_TYPE
    assert job.payload == {"source": "docs"}

    ran = invoke(db_url, "sources", "poll", "docs", "--app", app_module, "--run-now", "--json")
    assert ran.exit_code == 0, ran.output
    output = json.loads(ran.stdout)
    assert (output["result"], output["upserted"], output["enqueued"]) == ("polled", 1, 1)
    assert [r.event.name for r in synced.sources.history("docs")] == ["source_polled"]

    before = event_count(db_url)
    for args in (
        ("sources", "poll", "docs", "--run-now"),  # no --app
        ("sources", "poll", "nope", "--app", app_module),  # not registered there
        ("sources", "poll", "docs", "--app", "nomodule_xyz:registry"),
    ):
        refused = invoke(db_url, *args)
        assert refused.exit_code == 2, (args, refused.output)
        assert refused.stderr.startswith("error: "), refused.stderr
    assert event_count(db_url) == before
