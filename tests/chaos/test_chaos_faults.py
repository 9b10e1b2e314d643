"""The chaos suite: real worker processes under load while faults are injected, judged from
the history alone (plus the handlers' side log of starts).

Each run checks every promise the runtime makes (docs/operations.md, "What the runtime
guarantees"): every job terminal and none lost; none succeeded twice; no worker write
accepted outside a live lease; no reap of a live lease; no handler started on an expired
lease; every killed or stopped worker's leases recovered within one lease plus one reaper
interval plus ``RECOVERY_SLACK_S``; no worker died by itself; ``projections verify`` and
``replay --check --all`` clean. The figures of each run are printed (``-s`` shows them).

``JOBLEDGER_SOAK=1`` adds a longer run with every fault kind at once (``-m soak``).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from chaos_faults import ThrowawayPostgres
from chaos_plans import (
    restart_server,
    sigkill_and_restart,
    sigstop_past_lease,
    terminate_connections,
    together,
)
from chaos_run import ChaosReport, Load, run_chaos

pytestmark = [pytest.mark.chaos, pytest.mark.timeout(300)]

JOBS = 1200


def _backend(url: str) -> str:
    return "postgres" if url.startswith("postgresql") else "sqlite"


def _assert_kept(report: ChaosReport) -> None:
    print(f"\nCHAOS {report.figures()}")
    report_file = os.environ.get("JOBLEDGER_CHAOS_REPORT")
    if report_file:
        with open(report_file, "a") as out:
            out.write(report.figures() + "\n")
    assert not report.violations, report.failure_message()
    assert report.lost == 0 and report.double_successes == 0


def test_chaos_sigkilled_workers_lose_no_job_and_recover_within_a_lease(
    db_url: str, tmp_path: Path
) -> None:
    """Workers SIGKILLed at random under load and restarted: every promise holds, and each
    killed worker's leases end within one lease + one reaper interval (+ slack)."""
    report = run_chaos(
        db_url, tmp_path, backend=_backend(db_url), load=Load(JOBS, seed=1),
        plan=sigkill_and_restart(),
    )  # fmt: skip
    assert report.faults.get("sigkill") == 4
    _assert_kept(report)


def test_chaos_sigstopped_zombie_never_runs_or_writes_what_it_lost(
    db_url: str, tmp_path: Path
) -> None:
    """A worker SIGSTOPped until its leases were reaped, then resumed: it starts no handler
    on a lease it lost and none of its late writes is accepted; on PostgreSQL the other
    writers are not stalled past the recovery bound (the frozen process's sessions are ended:
    the server's idle timeout, the pool's watchdog)."""
    report = run_chaos(
        db_url, tmp_path, backend=_backend(db_url), load=Load(JOBS, seed=2, work_ms=(20, 80)),
        plan=sigstop_past_lease(),
    )  # fmt: skip
    assert report.faults.get("sigstop") == 2
    _assert_kept(report)


@pytest.mark.postgres
def test_chaos_terminated_connections_drop_no_outcome(
    pg_url: str, pg_admin_url: str, tmp_path: Path
) -> None:
    """``pg_terminate_backend`` of every ledger connection under load, four times: workers
    carry on, outcomes survive, every promise holds."""
    dbname = pg_url.rsplit("/", 1)[1]
    report = run_chaos(
        pg_url, tmp_path, backend="postgres", load=Load(JOBS, seed=3),
        plan=terminate_connections(pg_admin_url, dbname),
    )  # fmt: skip
    assert report.faults.get("pg_terminate_backend") == 4
    _assert_kept(report)


@pytest.mark.postgres
def test_chaos_postgres_restarts_are_survived(
    throwaway_pg: ThrowawayPostgres, throwaway_pg_url: str, tmp_path: Path
) -> None:
    """The test's own PostgreSQL restarted twice under load (fast, then immediate): the
    workers reconnect, no job is lost, every promise holds."""
    report = run_chaos(
        throwaway_pg_url, tmp_path, backend="postgres (own cluster)", load=Load(JOBS, seed=4),
        plan=restart_server(throwaway_pg),
    )  # fmt: skip
    assert report.faults.get("postgres_restart") == 2
    _assert_kept(report)


@pytest.mark.soak
@pytest.mark.timeout(1800)
@pytest.mark.skipif(not os.environ.get("JOBLEDGER_SOAK"), reason="soak: set JOBLEDGER_SOAK=1")
@pytest.mark.postgres
def test_chaos_soak_every_fault_at_once(
    throwaway_pg: ThrowawayPostgres, throwaway_pg_url: str, tmp_path: Path
) -> None:
    """The soak: 5,000 jobs on the test's own PostgreSQL through SIGKILLs, SIGSTOPs,
    terminated connections and server restarts; every promise holds."""
    dbname = throwaway_pg_url.rsplit("/", 1)[1]
    own_admin = f"{throwaway_pg.server_url}/postgres"
    plan = together(
        sigkill_and_restart((0.05, 0.15, 0.25, 0.35, 0.45)),
        sigstop_past_lease((0.5, 0.6)),
        terminate_connections(own_admin, dbname, (0.65, 0.7, 0.75)),
        restart_server(throwaway_pg, (0.8, 0.9)),
    )
    report = run_chaos(
        throwaway_pg_url, tmp_path, backend="postgres (own cluster)",
        load=Load(5000, seed=int(os.environ.get("JOBLEDGER_CHAOS_SEED", "5"))),
        plan=plan, workers=4, finish_timeout_s=600,
    )  # fmt: skip
    _assert_kept(report)
