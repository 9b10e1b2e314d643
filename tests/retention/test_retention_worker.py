"""The archiver maintenance service: off by default, and in a real worker process (asked for
with ``--retention-interval``) it moves the finished jobs past their rule."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

from retention_helpers import invoke, make_jobs

from ledger import Ledger
from ledger.core.retention import JobsArchived
from ledger.retention.retention_runs import policy_events
from ledger.runtime.config import PoolConfig

APP = "from ledger.runtime.handlers import Registry\nregistry = Registry()\n"


def test_the_archiver_is_off_unless_asked_for() -> None:
    """A pool runs no archiver by default; an interval turns it on."""
    assert PoolConfig().archiver_config() is None
    config = PoolConfig(retention_interval_s=60).archiver_config()
    assert config is not None and config.interval_s == 60


def test_a_worker_process_archives_on_its_interval(sqlite_url: str, tmp_path: Path) -> None:
    """`worker --retention-interval` runs a pass at start: the finished jobs move, named by a
    `jobs_archived` event whose actor is the service, and the live ones stay."""
    jobs = make_jobs(sqlite_url)
    assert invoke(sqlite_url, "retention", "set", "--after", "30d").exit_code == 0
    (tmp_path / "retention_app.py").write_text(APP)
    worker = subprocess.Popen(
        [
            str(Path(sys.executable).with_name("jobledger")),
            "--db",
            sqlite_url,
            "worker",
            "--app",
            "retention_app:registry",
            "--retention-interval",
            "3600",
        ],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        archived: list[JobsArchived] = []
        with Ledger.open(sqlite_url) as ledger:
            for _ in range(750):  # wait (up to ~15 s) for the service's first pass
                events = [e for _, e in policy_events(ledger.store)]
                archived = [e for e in events if isinstance(e, JobsArchived)]
                if archived:
                    break
                time.sleep(0.02)  # polling a real process: real time
        worker.send_signal(signal.SIGTERM)
        _, stderr = worker.communicate(timeout=30)
    finally:
        if worker.poll() is None:
            worker.kill()
    assert worker.returncode == 0, stderr
    [batch] = archived
    assert batch.actor == "archiver:sqlite"
    assert set(batch.job_ids) == {*jobs.finished, *jobs.kept}
    shown = json.loads(invoke(sqlite_url, "retention", "show", "--json").stdout)
    assert shown["sizes"]["jl_queue"] == len(jobs.live)
