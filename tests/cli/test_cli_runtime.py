"""``jobledger worker`` and ``jobledger demo``, in-process and as real processes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path

import pytest
from cli_helpers import assert_one_error_line, invoke
from click.testing import CliRunner

from jobledger_cli.main import cli
from ledger import JobStatus, Ledger

APP = textwrap.dedent(
    """
    import asyncio
    from ledger.runtime.handlers import PermanentError, Registry

    registry = Registry()
    not_a_registry = 42

    @registry.handler("app.ok")
    async def ok(ctx):
        await asyncio.sleep(float(ctx.payload.get("sleep", 0)))
        return {"echo": ctx.payload}

    @registry.handler("app.bad")
    async def bad(ctx):
        raise PermanentError("nope")

    @registry.handler("app.hang_async")
    async def hang_async(ctx):
        await asyncio.sleep(600)

    @registry.handler("app.hang_sync")
    def hang_sync(ctx):
        import time
        time.sleep(600)  # a sync handler nothing can interrupt
    """
)


@pytest.fixture
def app_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A handlers module importable from the current directory, under a fresh name."""
    name = f"jl_app_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{name}.py").write_text(APP)
    monkeypatch.chdir(tmp_path)
    return name


def test_burst_worker_processes_everything_due_and_exits_zero(db_url: str, app_module: str) -> None:
    """--burst works until nothing is due, prints a summary and exits 0 when none died."""
    with Ledger.open(db_url) as ledger:
        ledger.define("app.ok")
        ids = [ledger.enqueue("app.ok", {"n": n}).job_id for n in range(5)]
    result = invoke(db_url, "worker", "--app", f"{app_module}:registry", "--burst", "--json")
    assert result.exit_code == 0, result.stderr
    stats = json.loads(result.stdout)
    assert stats["succeeded"] == 5 and stats["dead"] == 0
    with Ledger.open(db_url) as ledger:
        for job_id in ids:
            state = ledger.get(job_id)  # type: ignore[arg-type]
            assert state is not None and state.status is JobStatus.SUCCEEDED


def test_burst_worker_exits_3_when_a_job_ended_dead(db_url: str, app_module: str) -> None:
    """A dead job in a burst run makes the exit code 3 (for scripts and CI)."""
    with Ledger.open(db_url) as ledger:
        ledger.define("app.bad")
        ledger.enqueue("app.bad")
    result = invoke(db_url, "worker", "--app", f"{app_module}:registry", "--burst")
    assert result.exit_code == 3
    assert "dead 1" in result.stdout
    assert result.stderr.strip().splitlines()[-1] == "error: 1 job(s) ended dead"


@pytest.mark.parametrize(
    ("app", "says"),
    [
        ("no_colon", "is not MODULE:ATTR"),
        ("jl_missing_module_xyz:registry", "cannot import"),
        ("{module}:not_a_registry", "not a ledger.runtime.handlers.Registry"),
        ("{module}:no_such_name", "has no 'no_such_name'"),
    ],
)
def test_a_bad_app_is_a_one_line_usage_error(
    sqlite_url: str, app_module: str, app: str, says: str
) -> None:
    """--app must name an importable Registry; anything else is a usage error (exit 2)."""
    result = invoke(sqlite_url, "worker", "--app", app.format(module=app_module), "--burst")
    assert_one_error_line(result, "error: ", exit_code=2)
    assert says in result.stderr


def test_types_must_have_handlers(sqlite_url: str, app_module: str) -> None:
    """--types naming a type without a handler is refused before anything runs."""
    result = invoke(
        sqlite_url, "worker", "--app", f"{app_module}:registry", "--types", "app.ok,ghost"
    )
    assert_one_error_line(result, "error: ", exit_code=2)
    assert "ghost" in result.stderr


def test_demo_works_a_mix_to_completion(db_url: str) -> None:
    """demo enqueues, works every job to an end and reports what the ledger recorded."""
    result = invoke(db_url, "demo", "--jobs", "60", "--json")
    assert result.exit_code == 0, result.stderr
    summary = json.loads(result.stdout)
    assert summary["jobs"] == 60
    assert summary["succeeded"] + summary["dead"] == 60
    assert summary["events_written"] >= 3 * 60
    with Ledger.open(db_url) as ledger:
        dead_types = {letter.job_type for letter in ledger.dead_letters()}
        assert dead_types <= {"demo.broken"}
        assert len(ledger.dead_letters()) == summary["dead"]
        if summary["example_retried"]:
            names = [r.event.name for r in ledger.history(uuid.UUID(summary["example_retried"]))]
            assert "job_retry_scheduled" in names and names[-1] == "job_succeeded"


def _console_script() -> str:
    return str(Path(sys.executable).with_name("jobledger"))


def test_demo_as_a_real_process_on_the_default_database(tmp_path: Path) -> None:
    """`jobledger demo` in an empty directory creates ./jobledger.db and suggests commands."""
    env = {k: v for k, v in os.environ.items() if k != "JOBLEDGER_DB"}
    done = subprocess.run(
        [_console_script(), "demo", "--jobs", "40"],
        check=False,
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "jobledger.db").exists()
    assert "succeeded" in done.stdout and "jobledger history" in done.stdout


def test_the_readme_demo_never_pauses_a_type_on_the_breaker(tmp_path: Path) -> None:
    """`jobledger demo` with its defaults (the README's main job) works its flaky type's
    deliberate failures without opening the per-type circuit breaker: a breaker opening there
    would make the demo sit out a 60 s cooldown (it did, once the breaker became per type)."""
    env = {k: v for k, v in os.environ.items() if k != "JOBLEDGER_DB"}
    done = subprocess.run(
        [_console_script(), "demo"],
        check=False,
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "circuit breaker opened" not in done.stderr
    assert "12 dead" in done.stdout


def test_sigterm_stops_a_worker_gracefully_letting_the_job_finish(
    sqlite_url: str, app_module: str, tmp_path: Path
) -> None:
    """SIGTERM: the running job finishes (within the grace), then the process exits 0."""
    with Ledger.open(sqlite_url) as ledger:
        ledger.define("app.ok")
        job_id = ledger.enqueue("app.ok", {"sleep": 1.0}).job_id
    worker = subprocess.Popen(
        [
            _console_script(),
            "--db",
            sqlite_url,
            "worker",
            "--app",
            f"{app_module}:registry",
            "--poll",
            "0.05",
        ],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        with Ledger.open(sqlite_url) as ledger:
            for _ in range(500):  # wait (up to ~10 s) until the job is running
                state = ledger.get(job_id)  # type: ignore[arg-type]
                if state is not None and state.status is JobStatus.LEASED:
                    break
                time.sleep(0.02)  # polling a real process: real time
        worker.send_signal(signal.SIGTERM)
        _, stderr = worker.communicate(timeout=30)
    finally:
        if worker.poll() is None:
            worker.kill()
    assert worker.returncode == 0, stderr
    assert "stopping" in stderr
    with Ledger.open(sqlite_url) as ledger:
        state = ledger.get(job_id)  # type: ignore[arg-type]
        assert state is not None and state.status is JobStatus.SUCCEEDED


@pytest.mark.parametrize("given", ["option", "environment"])
def test_the_worker_takes_a_host_id(sqlite_url: str, app_module: str, given: str) -> None:
    """--host-id (or $JOBLEDGER_HOST_ID) is the host part of the worker's id."""
    argv = ["worker", "--app", f"{app_module}:registry", "--burst"]
    if given == "option":
        result = invoke(sqlite_url, *argv, "--host-id", "rack1-c7")
    else:
        result = CliRunner().invoke(
            cli, ["--db", sqlite_url, *argv], env={"JOBLEDGER_HOST_ID": "rack1-c7"}
        )
    assert result.exit_code == 0, result.stderr
    assert result.stderr.startswith(f"default@rack1-c7:{os.getpid()}: ")


def test_a_bad_host_id_is_a_usage_error(sqlite_url: str, app_module: str) -> None:
    """A host id holding a worker id's separator is refused before the worker starts."""
    result = invoke(sqlite_url, "worker", "--app", f"{app_module}:registry", "--host-id", "a:b")
    assert_one_error_line(result, "error: Invalid value for '--host-id': a host id must", 2)


def test_the_worker_command_takes_the_breaker_settings(sqlite_url: str) -> None:
    """`jobledger worker --help` offers --breaker-threshold and --breaker-cooldown."""
    result = invoke(sqlite_url, "worker", "--help")
    assert result.exit_code == 0
    assert "--breaker-threshold" in result.stdout and "--breaker-cooldown" in result.stdout


@pytest.mark.parametrize("job_type", ["app.hang_async", "app.hang_sync"])
@pytest.mark.parametrize("first", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_second_signal_stops_a_worker_at_once_releasing_its_job(
    sqlite_url: str, app_module: str, tmp_path: Path, job_type: str, first: signal.Signals
) -> None:
    """The first signal starts a graceful stop (grace 60 s); the second stops at once: the
    in-flight job is released (pending, attempt not consumed) and the process exits 0 — also
    when the handler is a sync one that never returns."""
    with Ledger.open(sqlite_url) as ledger:
        ledger.define(job_type)
        job_id = ledger.enqueue(job_type).job_id
        assert job_id is not None
    argv = [_console_script(), "--db", sqlite_url, "worker", "--app", f"{app_module}:registry"]
    worker = subprocess.Popen(
        [*argv, "--poll", "0.05", "--grace", "60"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        with Ledger.open(sqlite_url) as ledger:
            for _ in range(500):  # wait (up to ~10 s) until the job is running
                state = ledger.get(job_id)
                if state is not None and state.status is JobStatus.LEASED:
                    break
                time.sleep(0.02)  # polling a real process: real time
        worker.send_signal(first)
        assert worker.stderr is not None
        for line in worker.stderr:  # ordered by the process's own word, not by a time window
            if line.startswith("stopping"):
                break
        worker.send_signal(signal.SIGINT)
        _, rest = worker.communicate(timeout=20)
    finally:
        if worker.poll() is None:
            worker.kill()
    assert worker.returncode == 0, rest
    assert "stopped at once" in rest
    with Ledger.open(sqlite_url) as ledger:
        state = ledger.get(job_id)
        assert state is not None and state.status is JobStatus.PENDING and state.attempt == 0
        assert [r.event.name for r in ledger.history(job_id)][-1] == "job_released"
