"""A real ``jobledger worker`` process serves ``jobledger.source_poll`` for the sources its
registry lists: the poll job runs the directory lister, enqueues the sync jobs, and the same
burst works them (SQLite file; the poll path is the same on PostgreSQL, tested in-process)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path

from ledger import JobStatus, Ledger
from ledger.core.source_polls.events import SourcePolled

JOBLEDGER = str(Path(sys.executable).with_name("jobledger"))

APP = textwrap.dedent(
    """
    from ledger.runtime.handlers import Registry, Result
    from ledger.runtime.source_listers import directory_lister

    registry = Registry()
    registry.source("docs", directory_lister("docs"), job_type="docs.sync")

    @registry.handler("docs.sync")
    def sync(ctx):
        return Result(output={"uri": ctx.subject.uri}, revision=ctx.subject.revision)
    """
)


def test_a_worker_process_runs_a_poll_job_and_its_sync_jobs(
    sqlite_url: str, tmp_path: Path
) -> None:
    """`worker --burst --types jobledger.source_poll` claims the poll job (its type defined by
    the enqueue, served because the registry has a lister), which enqueues one sync job per
    file; a second burst works those; the sync state holds both files and source_polled
    names the poll job."""
    (tmp_path / "docs").mkdir()
    for name in ("a.md", "b.md"):
        (tmp_path / "docs" / name).write_text(name)
    module = f"jl_sources_app_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{module}.py").write_text(APP)
    with Ledger.open(sqlite_url) as ledger:
        poll_job = ledger.sources.enqueue_poll("docs")
    argv = [JOBLEDGER, "--db", sqlite_url, "worker", "--app", f"{module}:registry"]

    def burst(*options: str) -> int:
        done = subprocess.run(
            [*argv, "--burst", "--json", "--poll", "0.1", *options],
            check=False,
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        return int(json.loads(done.stdout)["succeeded"])

    assert burst("--types", "jobledger.source_poll") == 1  # the built-in type is selectable
    with Ledger.open(sqlite_url) as ledger:
        assert ledger.counts() == {"succeeded": 1, "pending": 2}
    assert burst() == 2
    with Ledger.open(sqlite_url) as ledger:
        job = ledger.get(poll_job)
        assert job is not None and job.status is JobStatus.SUCCEEDED
        assert job.output == {
            "source": "docs", "result": "polled", "upserted": 2, "unchanged": 0,
            "deleted": 0, "enqueued": 2, "already_live": 0,
        }  # fmt: skip
        assert sorted(Path(row.uri).name for row in ledger.sources.sync_state("docs")) == [
            "a.md",
            "b.md",
        ]
        [record] = ledger.sources.history("docs")
        assert isinstance(record.event, SourcePolled) and record.event.poll_job_id == poll_job
