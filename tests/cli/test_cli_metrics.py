"""A real ``jobledger worker --metrics-port`` process: its /metrics, and its pool's report.

The reports and the metrics come from real processes on real databases; whether a pool is
stale is judged by the reader at a ``now`` the test chooses (the injectable clock's rule), so
no test waits for wall time to pass.
"""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import textwrap
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path

import msgspec
import pytest
from cli_helpers import invoke
from prometheus_client.parser import text_string_to_metric_families

from ledger import Ledger
from ledger.api.pools import STALE_INTERVALS, PoolReport
from ledger.core.values import BackoffPolicy
from ledger.maintenance.pool_reporter import PoolReporter, PoolReporterConfig

APP = textwrap.dedent(
    """
    from ledger.runtime.handlers import PermanentError, Registry

    registry = Registry()

    @registry.handler("app.ok")
    async def ok(ctx):
        return {"n": ctx.payload["n"]}

    @registry.handler("app.bad")
    async def bad(ctx):
        raise RuntimeError("fails every attempt")

    @registry.handler("app.never")
    async def never(ctx):
        raise PermanentError("no")
    """
)
REPORT_INTERVAL_S = 0.5
FAST_RETRY = BackoffPolicy(base_s=0.01, max_s=0.01, jitter=0.0)
DEADLINE_S = 30.0


@pytest.fixture
def app_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    name = f"jl_app_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{name}.py").write_text(APP)
    monkeypatch.chdir(tmp_path)
    return name


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture
def worker(
    db_url: str, app_module: str, tmp_path: Path
) -> Iterator[tuple[subprocess.Popen[str], int]]:
    """A real worker process serving /metrics on a free port; killed if a test leaves it."""
    port = _free_port()
    argv = [str(Path(sys.executable).with_name("jobledger")), "--db", db_url, "worker"]
    argv += ["--app", f"{app_module}:registry", "--poll", "0.05", "--breaker-threshold", "50"]
    argv += ["--metrics-port", str(port), "--report-interval", str(REPORT_INTERVAL_S)]
    with (tmp_path / "worker.log").open("w") as log:
        process = subprocess.Popen(argv, cwd=tmp_path, stderr=log, text=True)
    try:
        yield process, port
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGCONT)
            process.kill()
            process.wait(timeout=10)


def _scrape(port: int) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of the worker's /metrics, by name and labels (retried until it answers)."""
    deadline = time.monotonic() + DEADLINE_S
    while True:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as reply:
                text = reply.read().decode()
            break
        except (urllib.error.URLError, ConnectionError):
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)  # a real process starting: real time
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def _pool_reports(ledger: Ledger, pid: int) -> list[PoolReport]:
    return [report for report in ledger.pools() if report.pid == pid]


def _settled(ledger: Ledger, total: int) -> bool:
    counts = ledger.counts()
    return counts.get("succeeded", 0) + counts.get("dead", 0) == total


def test_metrics_match_the_ledger_and_the_pool_reports_itself(
    db_url: str, worker: tuple[subprocess.Popen[str], int]
) -> None:
    """After a run, /metrics' counters equal the ledger's counts; the pool's row is there
    while it runs, counts dead once it is silent past three intervals (SIGSTOP), and is gone
    after a graceful stop."""
    process, port = worker
    with Ledger.open(db_url) as ledger:
        for job_type in ("app.ok", "app.bad", "app.never"):
            ledger.define(job_type, max_attempts=2, backoff=FAST_RETRY)
        for n in range(8):
            ledger.enqueue("app.ok", {"n": n})
        for _ in range(3):
            ledger.enqueue("app.bad")
        ledger.enqueue("app.never")
        deadline = time.monotonic() + DEADLINE_S
        # Settled, and reported since: a report written while the last outcomes were still
        # being recorded holds their leases (in_flight counts buffered and recording jobs).
        while not (
            _settled(ledger, 12)
            and [r.in_flight for r in _pool_reports(ledger, process.pid)] == [0]
        ):
            assert time.monotonic() < deadline, ledger.counts()
            assert process.poll() is None, "the worker exited"
            time.sleep(0.05)  # polling a real process: real time
        samples = _scrape(port)
        by_type = ledger.counts_by_type()

        def sample(name: str, **labels: str) -> float:
            return samples[(name, tuple(sorted(labels.items())))]

        assert sample("jobledger_pool_jobs_succeeded_total", type="app.ok") == 8
        assert by_type[("succeeded", "app.ok")] == 8
        assert sample("jobledger_pool_jobs_dead_total", type="app.bad") == 3
        assert sample("jobledger_pool_jobs_dead_total", type="app.never") == 1
        assert by_type[("dead", "app.bad")] + by_type[("dead", "app.never")] == 4
        assert sample("jobledger_pool_jobs_failed_total", type="app.bad") == 3  # one retry each
        claimed = sum(
            v for (n, _), v in samples.items() if n == "jobledger_pool_jobs_claimed_total"
        )
        assert claimed == 8 + 3 * 2 + 1
        assert sample("jobledger_jobs", status="succeeded", type="app.ok") == 8
        assert sample("jobledger_jobs", status="dead", type="app.bad") == 3
        assert sample("jobledger_jobs", status="pending", type="app.ok") == 0
        assert sample("jobledger_job_run_duration_seconds_count", type="app.ok") == 8
        assert sample("jobledger_completion_duration_seconds_count", type="app.ok") == 8
        assert sample("jobledger_claim_duration_seconds_count") >= 1
        assert sample("jobledger_maintenance_passes_total", service="reaper", result="ok") >= 1
        assert sample("jobledger_breaker_open", type="app.ok") == 0
        assert sample("jobledger_pool_healthy") == 1
        assert sample("jobledger_pools", state="ok") == 1
        assert sample("jobledger_health_ok") == 1
        assert ("jobledger_projection_lag_events", (("projection", "audit"),)) in samples

        [running] = _pool_reports(ledger, process.pid)
        assert running.status == "ok" and running.interval_s == REPORT_INTERVAL_S
        assert running.concurrency == 10 and running.in_flight == 0
        assert ledger.health(now=running.last_seen_at).status == "ok"

        process.send_signal(signal.SIGSTOP)
        try:
            [frozen] = _pool_reports(ledger, process.pid)
            silent_long = frozen.last_seen_at + timedelta(
                seconds=STALE_INTERVALS * REPORT_INTERVAL_S + 0.1
            )
            judged = ledger.health(now=silent_long)
            assert judged.status == "degraded"
            assert any(frozen.pool_id in r and "counted dead" in r for r in judged.reasons)
            assert "no live worker pool" in judged.reasons
            recent = frozen.last_seen_at + timedelta(seconds=REPORT_INTERVAL_S)
            assert ledger.health(now=recent).status == "ok"
        finally:
            process.send_signal(signal.SIGCONT)
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=DEADLINE_S) == 0
        assert _pool_reports(ledger, process.pid) == []
        assert ledger.health().reasons == ["no live worker pool"]


def test_a_killed_pools_row_stays_stale_until_a_reporter_prunes_it(
    db_url: str, worker: tuple[subprocess.Popen[str], int]
) -> None:
    """SIGKILL leaves the pool's row: it counts dead once stale, and the next report by any
    pool after the retention deletes it; `jobledger pools` shows it meanwhile."""
    process, _ = worker
    with Ledger.open(db_url) as ledger:
        deadline = time.monotonic() + DEADLINE_S
        while not _pool_reports(ledger, process.pid):
            assert time.monotonic() < deadline and process.poll() is None
            time.sleep(0.05)  # polling a real process: real time
        process.kill()
        process.wait(timeout=10)
        [dead] = _pool_reports(ledger, process.pid)
        later = dead.last_seen_at + timedelta(seconds=STALE_INTERVALS * REPORT_INTERVAL_S + 1)
        judged = ledger.health(now=later)
        assert judged.status == "degraded" and judged.live_pools == 0
        assert [pool.stale for pool in judged.pools if pool.report.pid == process.pid] == [True]

        shown = invoke(db_url, "pools")
        assert shown.exit_code == 0, shown.stderr
        assert dead.pool_id in shown.stdout
        shaped = json.loads(invoke(db_url, "pools", "--json").stdout)
        assert [(p["pool_id"], p["pid"]) for p in shaped["pools"]] == [(dead.pool_id, dead.pid)]
        assert set(shaped) == {"status", "reasons", "at", "live_pools", "pools"}

        def survivor(now: datetime) -> PoolReport:
            fields = {**_fields(dead), "pool_id": "other@host:1", "pid": 1, "last_seen_at": now}
            return PoolReport(**fields)

        reporter = PoolReporter(ledger, survivor, PoolReporterConfig(interval_s=1, retention_s=60))
        reporter.run_once(now=dead.last_seen_at + timedelta(seconds=30))
        assert _pool_reports(ledger, process.pid) != []  # within the retention: kept
        reporter.run_once(now=dead.last_seen_at + timedelta(seconds=61))
        assert _pool_reports(ledger, process.pid) == []
        assert reporter.remove("other@host:1")
        assert ledger.pools() == []


def _fields(report: PoolReport) -> dict[str, object]:
    return {f.name: getattr(report, f.name) for f in msgspec.structs.fields(report)}
