"""A worker host cut off from the network for longer than its lease, then restored.

Three ``jobledger worker`` processes, each in a network namespace of the test's own (its
"host"), reach a PostgreSQL cluster of the test's own through a veth pair each
(:mod:`chaos_netns`). Under load, one host holding leases is cut off (its veth's root end set
down): the process runs on, but nothing it sends arrives. No process kill covers this: its
handlers finish, its writes queue on dead sockets, and when the link comes back they may land
late. The others must reap its leases and run its jobs; nothing it writes after its leases
expired may be accepted; restored, it must drop what it held without running it again, and
get back to work. Judged as every chaos run is (:func:`chaos_run.judge`).

Where namespaces cannot be created (a sandbox without the capabilities), the test is skipped
and says why — except under CI (``$CI`` set), where that is a failure.
"""

from __future__ import annotations

import functools
import os
import queue
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from uuid import UUID

import psycopg
import pytest
from chaos_faults import CHAOS_DIR, REPO_ROOT, ThrowawayPostgres, WorkerSettings, worker_env
from chaos_history import Attempt, read_side_log, walk
from chaos_netns import (
    HostFleet,
    HostNetwork,
    host_network,
    host_url,
    leftovers,
    netns_unavailable,
)
from chaos_plans import NetCut
from chaos_run import Load, run_chaos

from ledger import Ledger

pytestmark = [pytest.mark.chaos, pytest.mark.postgres, pytest.mark.timeout(150)]

CALLER = CHAOS_DIR / "chaos_caller.py"
SETTINGS = WorkerSettings(
    concurrency=4, lease_s=2.0, reaper_interval_s=0.5, reaper_retry_delay_s=0.2, grace_s=5.0,
    poll_s=0.2,
)  # fmt: skip


@pytest.fixture
def network() -> Iterator[HostNetwork]:
    """Three hosts in namespaces of this test's own, removed afterwards (checked)."""
    reason = netns_unavailable()
    if reason is not None:
        if os.environ.get("CI"):
            pytest.fail(f"CI must run the network-cut scenario, but here {reason}")
        pytest.skip(f"network namespaces cannot be created in this environment: {reason}")
    with host_network(3) as hosts:
        yield hosts
    assert leftovers(hosts) == [], "namespaces, veths or routes outlived the test"


def _victim_log(report_dir: Path, worker_id: str) -> list[str]:
    """What the cut-off worker logged beyond its routine (its warnings, errors and the
    outcomes it dropped), one line each."""
    lines: list[str] = []
    for path in sorted(report_dir.glob("*.err")):
        text = path.read_text(errors="replace")
        if text.startswith(f"{worker_id}: "):  # the CLI's first line names its worker id
            lines += [
                line[:200]
                for line in text.splitlines()
                if any(word in line for word in (" WARNING ", " ERROR ", "dropped", "lost"))
            ]
    return lines


def test_chaos_host_cut_off_past_its_lease_loses_nothing_and_runs_nothing_twice(
    network: HostNetwork, tmp_path: Path
) -> None:
    """A worker host cut off the network past its lease, then restored: its leases are reaped
    and run elsewhere, none of its late writes is accepted, it starts nothing it lost and gets
    back to work; 0 lost, 0 double successes, verify and replay clean."""
    server = ThrowawayPostgres(listen=network.root_addresses(), trust=[network.subnet])
    try:
        url = server.create_database(f"jl_netcut_{uuid.uuid4().hex[:8]}")
        Ledger.open(url, create=True).close()
        cut = NetCut(
            network,
            after=Load(120, seed=21, flaky_share=0.0, work_ms=(50, 150)),
            at=0.15,
            min_cut_s=2 * SETTINGS.lease_s,
        )
        report = run_chaos(
            url, tmp_path, backend="postgres (own cluster, hosts in netns)",
            load=Load(300, seed=20, work_ms=(50, 250)), plan=cut, workers=3, settings=SETTINGS,
            fleet_of=functools.partial(HostFleet, network), finish_timeout_s=60,
        )  # fmt: skip
        logged = _victim_log(tmp_path / "side-log", cut.victim)
        print(f"\nCHAOS {report.figures()}\nNETCUT the cut-off host logged:\n" + "\n".join(logged))
        reaped, refused = _assert_cut_off_host_kept_out(url, cut, tmp_path / "side-log")
        print(
            f"NETCUT victim {cut.victim} held {len(cut.held)} leases when looked at ({reaped} "
            f"reaped and run elsewhere), cut {cut.cut_s}s, back to a success "
            f"{cut.back_to_success_s}s after the restore; {refused} handlers holding leases "
            f"finished after the cut (refused)"
        )
    finally:
        server.destroy()
    assert report.faults.get("netcut") == 1
    assert not report.violations, report.failure_message()
    assert report.lost == 0 and report.double_successes == 0
    assert cut.cut_s > SETTINGS.lease_s
    assert cut.back_to_success_s is not None, "the restored host never got back to work"
    assert refused >= 1, "no handler of the cut-off host finished after the cut"


def _assert_cut_off_host_kept_out(url: str, cut: NetCut, log_dir: Path) -> tuple[int, int]:
    """Every job reaped from the victim (``lease_expired``: its leases at the cut, those it
    held when the plan looked and any it claimed just after) succeeded on another host; the
    victim started none of the jobs it held again once restored; every handler
    it finished after the cut, on a lease it held before it, had its outcome refused (the cut
    outlasts every such lease). How many were reaped, and how many such handlers finished."""
    assert cut.held, "the victim held no lease when it was cut off"
    assert cut.cut_made_at is not None and cut.back_at is not None
    mine = [s for s in read_side_log(log_dir) if s.worker_id == cut.victim]
    attempts: dict[tuple[UUID, int, int], Attempt] = {}
    reaped = 0
    with Ledger.open(url) as ledger:
        for job_id in {*cut.held, *(s.job_id for s in mine)}:
            job = walk(job_id, ledger.history(job_id))
            attempts.update((a.key, a) for a in job.attempts)
            lost = [
                a
                for a in job.attempts
                if a.worker_id == cut.victim and (a.ended_by or "").startswith("failed:lease_exp")
            ]
            if not lost:
                continue
            reaped += 1
            last = job.attempts[-1]
            assert last.ended_by == "succeeded" and last.worker_id != cut.victim, (job_id, last)
    assert reaped >= 1, "none of the cut-off host's leases was reaped"
    rerun = [s for s in mine if not s.finished and s.job_id in cut.held and s.wall >= cut.back_at]
    assert rerun == [], f"the restored host ran jobs it had lost: {rerun}"
    finished_late = [
        finish
        for finish in mine
        if finish.finished
        and finish.wall > cut.cut_made_at
        and attempts[(finish.job_id, finish.run, finish.attempt)].leased_at < cut.cut_made_at
    ]
    for finish in finished_late:
        attempt = attempts[(finish.job_id, finish.run, finish.attempt)]
        assert attempt.ended_by != "succeeded", f"an outcome from the cut-off host: {finish}"
    return reaped, len(finished_late)


CALL_BOUND_S = 20.0
"""How long after the link is back a call on a connection its server forgot may take to end
(the store's dead-peer bounds: keepalive probes after 5 s of silence)."""


def test_call_whose_server_forgot_it_while_cut_off_ends_once_the_link_is_back(
    network: HostNetwork, tmp_path: Path
) -> None:
    """A ledger call already delivered (its bytes acknowledged) when its host was cut off, whose
    server session was then ended and forgotten, ends after the link is back instead of
    waiting forever for an answer no one will send."""
    server = ThrowawayPostgres(listen=network.root_addresses(), trust=[network.subnet])
    host = network.hosts[0]
    caller: subprocess.Popen[str] | None = None
    try:
        dbname = f"jl_netcall_{uuid.uuid4().hex[:8]}"
        url = server.create_database(dbname)
        with Ledger.open(url, create=True) as ledger:
            ledger.define("netcut.probe")
        caller = subprocess.Popen(
            [*host.exec_prefix(), sys.executable, str(CALLER), host_url(url, host)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            cwd=REPO_ROOT, env=worker_env(tmp_path),
        )  # fmt: skip
        said = _lines(caller)
        assert said.get(timeout=30) == "open"
        with psycopg.connect(url) as locker, psycopg.connect(url, autocommit=True) as look:
            # The call blocks on the events table's lock: delivered, waiting for its answer.
            locker.execute("LOCK TABLE jl_events IN ACCESS EXCLUSIVE MODE")
            assert caller.stdin is not None
            caller.stdin.write("go\n")
            caller.stdin.flush()
            _wait("the call waiting on the lock", lambda: _waiting_on_lock(look, host.host_address))
            _wait("the call's bytes acknowledged", lambda: network.unacknowledged(0) == 0)
            network.cut(0)
            look.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE client_addr = %s",
                [host.host_address],
            )
            _wait("its session ended", lambda: not _sessions_of(look, host.host_address))
            network.forget_connections(0)
            locker.rollback()
        network.restore(0)
        restored = time.monotonic()
        try:
            ended = said.get(timeout=CALL_BOUND_S)
        except queue.Empty:
            ended = None
        took = time.monotonic() - restored
        print(f"\nNETCALL the forgotten call: {ended!r}, {took:.1f}s after the link was back")
        assert ended is not None, (
            f"the call had not ended {CALL_BOUND_S:g}s after the link was back"
        )
        assert ended == "returned" or ended.startswith("raised store."), ended
    finally:
        if caller is not None and caller.poll() is None:
            caller.kill()
            caller.wait(10)
        server.destroy()


def _lines(process: subprocess.Popen[str]) -> queue.Queue[str]:
    """``process``'s output lines as they come (read on a thread, so waits can be bounded)."""
    lines: queue.Queue[str] = queue.Queue()

    def read() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            lines.put(line.strip())

    threading.Thread(target=read, daemon=True).start()
    return lines


def _wait(what: str, predicate: Callable[[], bool], timeout_s: float = 15.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, f"no {what} after {timeout_s:g}s"
        time.sleep(0.02)


def _sessions_of(look: psycopg.Connection[Any], address: str) -> list[tuple[Any, ...]]:
    return look.execute(
        "SELECT pid, wait_event_type FROM pg_stat_activity WHERE client_addr = %s", [address]
    ).fetchall()


def _waiting_on_lock(look: psycopg.Connection[Any], address: str) -> bool:
    return any(wait == "Lock" for _, wait in _sessions_of(look, address))
