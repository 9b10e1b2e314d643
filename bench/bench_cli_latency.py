"""How long the CLI takes to answer: whole ``jobledger`` processes, timed from outside.

Makes a SQLite ledger in a temporary directory (``init``, then a few jobs through
``enqueue``), then runs each command ``--repeat`` times (default 7) as a subprocess and
prints the median and the fastest wall-clock time of each, and its median CPU time:
``--help``, ``show JOB``, ``history JOB``, ``jobs``, ``stats``, with ``python -c "import
click"`` as the floor (an interpreter that imports only click; no click command can answer
faster). The console script is the one beside this interpreter (``.venv/bin/jobledger``), so
it times what a user runs.

    .venv/bin/python bench/bench_cli_latency.py
    .venv/bin/python bench/bench_cli_latency.py --repeat 15 --importtime show

``--importtime COMMAND`` also prints the ten slowest imports of one run of that command
(``python -X importtime``), to find what a command loads that it does not use.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

JOBS = 5


def console_script() -> Path:
    """The ``jobledger`` script installed beside this interpreter."""
    script = Path(sys.executable).parent / "jobledger"
    if not script.exists():
        raise SystemExit(f"no console script at {script}: pip install -e . into this venv")
    return script


def timed(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """One run's wall-clock seconds and the CPU seconds (user + system) it used; a failing
    run stops the bench (its time means nothing). On a busy machine the wall time grows
    with the load, the CPU time much less: both are printed."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(argv, env=env, capture_output=True, check=False)
    elapsed = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed:\n{done.stderr.decode()}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return elapsed, cpu


def make_ledger(script: Path, db: Path, env: dict[str, str]) -> str:
    """A SQLite ledger with :data:`JOBS` jobs; the id of the last one."""
    subprocess.run([str(script), "--db", str(db), "init"], env=env, check=True, capture_output=True)
    job = ""
    for n in range(JOBS):
        out = subprocess.run(
            [
                str(script),
                "--db",
                str(db),
                "enqueue",
                "--auto-define",
                "--json",
                "bench.noop",
                json.dumps({"n": n}),
            ],
            env=env,
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        job = str(json.loads(out)["job_id"])
    return job


def slowest_imports(argv: list[str], env: dict[str, str], top: int = 10) -> list[str]:
    """The ``top`` imports with the largest cumulative time in one run under -X importtime."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", *argv],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    rows = []
    for line in done.stderr.splitlines():
        if not line.startswith("import time:") or "cumulative" in line:
            continue
        _, cumulative, name = (part.strip() for part in line[len("import time:") :].split("|"))
        rows.append((int(cumulative), name))
    rows.sort(reverse=True)
    return [f"{us / 1000:8.1f} ms  {name}" for us, name in rows[:top]]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=7, help="runs of each command (median)")
    parser.add_argument("--importtime", metavar="COMMAND", help="also list COMMAND's imports")
    args = parser.parse_args()
    script = console_script()
    env = {k: v for k, v in os.environ.items() if not k.startswith("JOBLEDGER_")}
    with tempfile.TemporaryDirectory(prefix="jl_cli_latency_") as scratch:
        db = Path(scratch) / "ledger.db"
        job = make_ledger(script, db, env)
        base = [str(script), "--db", str(db)]
        cases = {
            "python -c 'import click'": [sys.executable, "-c", "import click"],
            "--help": [str(script), "--help"],
            "show JOB": [*base, "show", job],
            "history JOB": [*base, "history", job],
            "jobs": [*base, "jobs"],
            "stats": [*base, "stats"],
        }
        print(f"load average before: {os.getloadavg()[0]:.2f} ({os.cpu_count()} cores)")
        header = f"{'command':<28}{'wall median':>12}{'fastest':>10}{'CPU median':>12}"
        print(f"{header}   ({args.repeat} runs, SQLite)")
        for label, argv in cases.items():
            timed(argv, env)  # warm the page cache and the bytecode cache first
            runs = [timed(argv, env) for _ in range(args.repeat)]
            walls = [wall for wall, _ in runs]
            median, fastest = statistics.median(walls) * 1000, min(walls) * 1000
            cpu = statistics.median(cpu for _, cpu in runs) * 1000
            print(f"{label:<28}{median:>9.0f} ms{fastest:>7.0f} ms{cpu:>9.0f} ms")
        if args.importtime:
            command = {"help": ["--help"], "show": ["show", job], "history": ["history", job]}
            tail = command.get(args.importtime, [args.importtime])
            print(f"\nslowest imports of `jobledger {' '.join(tail)}` (cumulative):")
            runner = [str(script)] if args.importtime == "help" else base
            python_argv = [runner[0], *runner[1:], *tail]
            for row in slowest_imports(python_argv, env):
                print(row)


if __name__ == "__main__":
    main()
