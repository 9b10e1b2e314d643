"""How long the CLI takes to answer: whole ``jobledger`` processes, timed from outside.

Makes a SQLite ledger in a temporary directory (``init``, then a few jobs through
``enqueue``), then runs each command ``--repeat`` times (default 7) as a subprocess, the
commands interleaved turn by turn so that a drift of the machine hits them alike, and prints
the median and the fastest wall-clock time of each, its median CPU time, and its median's
ratio to the floor: ``--help``, ``show JOB``, ``history JOB``, ``jobs``, ``stats``, with
``python -c "import click"`` as the floor (an interpreter that imports only click; no click
command can answer faster). The console script is the one beside this interpreter
(``.venv/bin/jobledger``), so it times what a user runs.

    .venv/bin/python bench/bench_cli_latency.py
    .venv/bin/python bench/bench_cli_latency.py --repeat 15 --importtime show

``--importtime COMMAND`` also prints the ten slowest imports of one run of that command
(``python -X importtime``), to find what a command loads that it does not use.

``--against PYTHON`` compares with another install (another checkout's venv, a wheel's):
each command runs under this install and that one in turn (A B, then B A, and so on),
against the same ledger; it prints both medians, their ratio, and each one's ratio to the
click floor (both installs' click runs pooled):

    .venv/bin/python bench/bench_cli_latency.py --against ../old/.venv/bin/python --repeat 15

Bytecode is cached as an install caches it: ``PYTHONDONTWRITEBYTECODE`` (set in some
containers) is dropped from the commands' environment, and a first untimed run of each
command writes the caches, as a user's first run (or pip, for a wheel) does.
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
FLOOR = "python -c 'import click'"
"""The floor's label: an interpreter that imports click and nothing of ours."""


def console_script(python: str = sys.executable) -> Path:
    """The ``jobledger`` script installed beside ``python`` (this interpreter by default)."""
    script = Path(python).parent / "jobledger"
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


def cases(python: str, script: Path, db: Path, job: str) -> dict[str, list[str]]:
    """The commands timed, as argv lists for one install."""
    base = [str(script), "--db", str(db)]
    return {
        FLOOR: [python, "-c", "import click"],
        "--help": [str(script), "--help"],
        "show JOB": [*base, "show", job],
        "history JOB": [*base, "history", job],
        "jobs": [*base, "jobs"],
        "stats": [*base, "stats"],
    }


def interleaved(
    installs: list[dict[str, list[str]]], repeat: int, env: dict[str, str]
) -> list[dict[str, list[tuple[float, float]]]]:
    """Every command of every install ``repeat`` times, interleaved: each turn runs every
    command (in an order rotated per turn) under every install (in an order reversed every
    other turn), so a drift of the machine over the minutes hits every figure alike, the
    click floor included. Per install, per command: (wall, CPU) seconds of each run."""
    labels = list(installs[0])
    for commands in installs:  # warm the page cache and the bytecode cache first
        for argv in commands.values():
            timed(argv, env)
    runs: list[dict[str, list[tuple[float, float]]]] = [{k: [] for k in labels} for _ in installs]
    for turn in range(repeat):
        shift = turn % len(labels)
        order = list(range(len(installs)))
        if turn % 2:
            order.reverse()
        for label in labels[shift:] + labels[:shift]:
            for index in order:
                runs[index][label].append(timed(installs[index][label], env))
    return runs


def report_one(runs: dict[str, list[tuple[float, float]]], repeat: int) -> None:
    floor = statistics.median(wall for wall, _ in runs[FLOOR]) * 1000
    header = f"{'command':<28}{'wall median':>12}{'fastest':>10}{'CPU median':>12}{'/floor':>8}"
    print(f"{header}   ({repeat} runs each, interleaved, SQLite)")
    for label, measured in runs.items():
        walls = [wall for wall, _ in measured]
        median, fastest = statistics.median(walls) * 1000, min(walls) * 1000
        cpu = statistics.median(cpu for _, cpu in measured) * 1000
        print(f"{label:<28}{median:>9.0f} ms{fastest:>7.0f} ms{cpu:>9.0f} ms{median / floor:>8.2f}")


def report_against(
    mine: dict[str, list[tuple[float, float]]],
    theirs: dict[str, list[tuple[float, float]]],
    repeat: int,
) -> None:
    """Both installs' medians, their ratio, and each one's ratio to the click floor (both
    installs' click runs pooled: the same interpreter and click, so their medians differ by
    noise only)."""
    floor = statistics.median(wall for wall, _ in [*mine[FLOOR], *theirs[FLOOR]]) * 1000
    print(
        f"{'command':<28}{'this':>8}{'other':>9}{'this/other':>12}"
        f"{'this/floor':>12}{'other/floor':>13}   (wall medians of {repeat}, interleaved)"
    )
    for label, measured in mine.items():
        a = statistics.median(wall for wall, _ in measured) * 1000
        b = statistics.median(wall for wall, _ in theirs[label]) * 1000
        print(
            f"{label:<28}{a:>5.0f} ms{b:>6.0f} ms{a / b:>12.2f}{a / floor:>12.2f}{b / floor:>13.2f}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=7, help="runs of each command (median)")
    parser.add_argument("--importtime", metavar="COMMAND", help="also list COMMAND's imports")
    parser.add_argument(
        "--against", metavar="PYTHON", help="another install's interpreter, compared run by run"
    )
    args = parser.parse_args()
    script = console_script()
    # PYTHONDONTWRITEBYTECODE (set on some CI machines and containers) would make every run
    # compile every module of this package from source: not what a user's install does (pip
    # compiles a wheel's modules; an editable install writes them on the first run).
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("JOBLEDGER_") and k != "PYTHONDONTWRITEBYTECODE"
    }
    with tempfile.TemporaryDirectory(prefix="jl_cli_latency_") as scratch:
        db = Path(scratch) / "ledger.db"
        job = make_ledger(script, db, env)
        mine = cases(sys.executable, script, db, job)
        print(f"load average before: {os.getloadavg()[0]:.2f} ({os.cpu_count()} cores)")
        if args.against:
            print(f"this: {sys.executable}\nother: {args.against}")
            theirs = cases(args.against, console_script(args.against), db, job)
            here, there = interleaved([mine, theirs], args.repeat, env)
            report_against(here, there, args.repeat)
        else:
            report_one(interleaved([mine], args.repeat, env)[0], args.repeat)
        if args.importtime:
            command = {"help": ["--help"], "show": ["show", job], "history": ["history", job]}
            tail = command.get(args.importtime, [args.importtime])
            print(f"\nslowest imports of `jobledger {' '.join(tail)}` (cumulative):")
            runner = [str(script)] if args.importtime == "help" else [str(script), "--db", str(db)]
            python_argv = [runner[0], *runner[1:], *tail]
            for row in slowest_imports(python_argv, env):
                print(row)


if __name__ == "__main__":
    main()
