"""A job whose handler kills its worker process (issue 28, item 1), with real processes.

Each test runs ``jobledger worker --burst`` again and again on one host id, as an operator's
supervisor would restart it, on both backends. The handler that was running when its process
died spends its attempt (``worker_lost``, ``job.worker_lost``) and ends dead after its
``max_attempts``; a claim the dead process held but never started is released without cost;
every other job finishes; ``diagnose`` shows how many times the job took its worker down; the
views and the decisions replay clean. The kills are the process's own ``os._exit`` and, for
the out-of-memory case, a SIGKILL on crossing a memory limit while the handler allocates,
under a small ``RLIMIT_AS`` so the host's memory is never at stake.
"""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
import textwrap
import uuid
from collections.abc import Callable
from pathlib import Path
from uuid import UUID

import pytest
from click.testing import CliRunner

from jobledger_cli.main import cli
from ledger import JobStatus, Ledger
from ledger.core.events import JobFailed, JobReleased
from ledger.core.values import BackoffPolicy

JOBLEDGER = str(Path(sys.executable).with_name("jobledger"))

APP = textwrap.dedent(
    """
    import os
    import signal
    import threading
    import time

    from ledger.runtime.handlers import Registry

    registry = Registry()

    @registry.handler("exit")
    def exit_(ctx):
        os._exit(7)

    @registry.handler("hog")
    def hog(ctx):
        held = []
        while True:
            try:
                held.append(bytearray(16 << 20))  # zero-filled: the pages are touched
            except MemoryError:
                time.sleep(0.01)  # at the address-space limit: still holding, as under swap

    @registry.handler("t1")
    def t1(ctx):
        return {"ok": True}

    def _out_of_memory_killer(limit):
        # What the kernel's OOM killer does, inside the process: SIGKILL once the resident
        # memory crosses the limit (no handler code runs, nothing is flushed).
        page = os.sysconf("SC_PAGE_SIZE")
        while True:
            with open("/proc/self/statm") as statm:
                if int(statm.read().split()[1]) * page > limit:
                    os.kill(os.getpid(), signal.SIGKILL)
            time.sleep(0.002)

    if os.environ.get("JL_TEST_RSS_LIMIT"):
        limit = int(os.environ["JL_TEST_RSS_LIMIT"])
        threading.Thread(target=_out_of_memory_killer, args=(limit,), daemon=True).start()
    """
)

RSS_LIMIT = 160 << 20
"""Resident memory at which the test's stand-in for the OOM killer kills the worker."""
ADDRESS_SPACE_LIMIT = 1536 << 20
"""The worker's RLIMIT_AS: the most memory a runaway handler could ever take from the host."""


@pytest.fixture
def app(tmp_path: Path) -> str:
    """The handlers module, importable by the worker processes, under a fresh name."""
    name = f"jl_lost_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{name}.py").write_text(APP)
    return name


def _limit_address_space() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE_LIMIT, ADDRESS_SPACE_LIMIT))


def _work(
    url: str,
    app: str,
    cwd: Path,
    *,
    types: str,
    concurrency: int,
    limited: bool = False,
    starts: str = "exact",
) -> int:
    """One ``jobledger worker --burst`` run on host h1; its exit code (negative: the signal
    that killed it)."""
    env = {**os.environ, "PYTHONPATH": str(cwd)}
    if limited:
        env["JL_TEST_RSS_LIMIT"] = str(RSS_LIMIT)
    argv = [JOBLEDGER, "--db", url, "worker", "--app", f"{app}:registry", "--types", types]
    argv += ["--host-id", "h1", "--burst", "--lease", "5", "--concurrency", str(concurrency)]
    argv += ["--starts", starts]
    preexec: Callable[[], None] | None = _limit_address_space if limited else None
    done = subprocess.run(
        argv,
        check=False,
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=preexec,
    )
    return done.returncode


def _work_until_done(url: str, app: str, cwd: Path, **options: object) -> list[int]:
    """Restart the burst worker until a run ends normally (0, or 3: a job ended dead); the
    exit codes of every run."""
    codes: list[int] = []
    for _ in range(8):
        codes.append(_work(url, app, cwd, **options))  # type: ignore[arg-type]
        if codes[-1] in (0, 3):
            return codes
    pytest.fail(f"the worker never finished a run: exit codes {codes}")


def _cli(url: str, *args: str) -> str:
    result = CliRunner().invoke(cli, ["--db", url, *args])
    assert result.exit_code == 0, (args, result.stdout, result.stderr)
    return result.stdout


def _assert_history_checks_clean(url: str) -> None:
    _cli(url, "projections", "verify")
    assert "0 finding(s)" in _cli(url, "replay", "--check", "--all")


def _workers_lost(url: str, job_id: UUID) -> dict[str, object]:
    report = json.loads(_cli(url, "diagnose", str(job_id), "--json"))
    [finding] = [f for f in report["findings"] if f["name"] == "workers_lost"]
    return finding  # type: ignore[no-any-return]


def _setup(url: str, killer: str, max_attempts: int) -> tuple[UUID, list[UUID]]:
    """The killer job (first in claim order) and three ordinary ones."""
    with Ledger.open(url) as ledger:
        now = BackoffPolicy(base_s=0.0)  # retries due at once: the next burst run takes them
        ledger.define(killer, max_attempts=max_attempts, default_priority=200, backoff=now)
        ledger.define("t1", backoff=now)
        killer_id = ledger.enqueue(killer).job_id
        others = [ledger.enqueue("t1", {"n": n}).job_id for n in range(3)]
    assert killer_id is not None and all(o is not None for o in others)
    return killer_id, others  # type: ignore[return-value]


def test_the_issue_repro_ends_the_killer_dead_and_finishes_the_others(
    db_url: str, app: str, tmp_path: Path
) -> None:
    """The issue's repro (max_attempts 1, ten slots, four burst runs): the job whose handler
    called os._exit is dead as worker_lost after one death and the three others succeed."""
    killer, others = _setup(db_url, "exit", max_attempts=1)

    codes = [_work(db_url, app, tmp_path, types="exit,t1", concurrency=10) for _ in range(4)]

    assert codes[0] == 7 and codes[1:] == [0, 0, 0]
    with Ledger.open(db_url) as ledger:
        dead = ledger.get(killer)
        assert dead is not None and dead.status is JobStatus.DEAD and dead.attempt == 1
        assert dead.last_error is not None and dead.last_error.code == "job.worker_lost"
        assert dead.last_error.kind == "worker_lost"
        for job_id in others:
            state = ledger.get(job_id)
            assert state is not None and state.status is JobStatus.SUCCEEDED
    assert _workers_lost(db_url, killer)["value"] == 1
    _assert_history_checks_clean(db_url)


def test_a_job_that_keeps_killing_its_worker_is_dead_after_max_attempts_and_diagnosed(
    db_url: str, app: str, tmp_path: Path
) -> None:
    """max_attempts 3, one slot: the worker dies three times, the killer ends dead after its
    third attempt, diagnose says it took its worker down 3 times; the job claimed with it each
    time (buffered, never started) is released without spending an attempt, and every other
    job succeeds at its first attempt."""
    killer, others = _setup(db_url, "exit", max_attempts=3)

    codes = _work_until_done(db_url, app, tmp_path, types="exit,t1", concurrency=1)

    assert codes == [7, 7, 7, 0]
    with Ledger.open(db_url) as ledger:
        dead = ledger.get(killer)
        assert dead is not None and dead.status is JobStatus.DEAD and dead.attempt == 3
        failures = [r.event for r in ledger.history(killer) if isinstance(r.event, JobFailed)]
        assert [(f.attempt, f.failure.code) for f in failures] == [
            (n, "job.worker_lost") for n in (1, 2, 3)
        ]
        released = 0
        for job_id in others:
            state = ledger.get(job_id)
            assert state is not None and (state.status, state.attempt) == (JobStatus.SUCCEEDED, 1)
            events = [r.event for r in ledger.history(job_id)]
            assert not any(isinstance(e, JobFailed) for e in events)
            released += sum(isinstance(e, JobReleased) for e in events)
        assert released == 3  # one buffered claim of each dead process, released for free
    lost = _workers_lost(db_url, killer)
    assert lost["value"] == 3
    assert "took its worker down 3 times" in str(lost["explanation"])
    assert "dead after attempt 3 of 3" in str(lost["explanation"])
    _assert_history_checks_clean(db_url)


def test_a_handler_killed_for_its_memory_spends_its_attempts(
    db_url: str, app: str, tmp_path: Path
) -> None:
    """A handler that allocates until the process is SIGKILLed on crossing a memory limit
    (RLIMIT_AS caps what it could take from the host): killed twice, dead after max_attempts
    2 as worker_lost; the other jobs succeed without spending an attempt."""
    killer, others = _setup(db_url, "hog", max_attempts=2)

    codes = _work_until_done(db_url, app, tmp_path, types="hog,t1", concurrency=1, limited=True)

    assert codes == [-signal.SIGKILL, -signal.SIGKILL, 0]
    with Ledger.open(db_url) as ledger:
        dead = ledger.get(killer)
        assert dead is not None and dead.status is JobStatus.DEAD and dead.attempt == 2
        assert dead.last_error is not None and dead.last_error.code == "job.worker_lost"
        for job_id in others:
            state = ledger.get(job_id)
            assert state is not None and (state.status, state.attempt) == (JobStatus.SUCCEEDED, 1)
    assert _workers_lost(db_url, killer)["value"] == 2
    _assert_history_checks_clean(db_url)


def test_with_claim_starts_a_crash_spends_the_attempts_of_buffered_jobs_too(
    db_url: str, app: str, tmp_path: Path
) -> None:
    """--starts claim counts the claim as the start: the job buffered behind the killer when
    the worker died spends an attempt as worker_lost too (and succeeds on its retry)."""
    killer, others = _setup(db_url, "exit", max_attempts=1)

    codes = _work_until_done(db_url, app, tmp_path, types="exit,t1", concurrency=1, starts="claim")

    assert codes == [7, 0]
    with Ledger.open(db_url) as ledger:
        dead = ledger.get(killer)
        assert dead is not None and dead.status is JobStatus.DEAD
        lost = [
            job_id
            for job_id in others
            if any(
                isinstance(r.event, JobFailed) and r.event.failure.code == "job.worker_lost"
                for r in ledger.history(job_id)
            )
        ]
        assert len(lost) == 1  # the one claimed with the killer (one slot, prefetch 1)
        for job_id in others:
            state = ledger.get(job_id)
            assert state is not None and state.status is JobStatus.SUCCEEDED
    _assert_history_checks_clean(db_url)
