"""jobledger's hot path at two commits, interleaved, through one harness: an A/B in one run.

Each side is a commit's tree (``git archive`` into a temporary directory; ``.`` is this
checkout as it is, uncommitted changes included), put first on ``PYTHONPATH`` of the harness
and of every process it starts. The harness is this checkout's ``compare.py --only jobledger``
(its adapter, its server checks, its fresh database per measurement) and the installed
dependencies are this checkout's venv's: only the library differs between the sides.

Runs alternate A B B A A B B A … (one ``compare.py`` round each, seeded by the run's index),
so that a drift of the machine (load, page cache, autovacuum) falls on both sides alike. For
each declared depth it prints each figure's median per side and the ratio B/A: jobs/s
(enqueue, end to end, steady), CPU per job (the worker process's and the whole host's,
server included: steadier than jobs/s on a shared machine) and bytes per job (WAL, tables):

    .venv/bin/python bench/ab.py 1a790ec .              # the last commit before a change
    .venv/bin/python bench/ab.py main HEAD --runs 6 --depths 110 --json bench/results/ab.json
    .venv/bin/python bench/ab.py 317d4c2 903f03e 6dc5575 adc7d13 --runs 2 --depths 110

With more than two commits (a bisect's points, oldest first) every run measures each once,
forward then backward, and each is compared with the first.

A change to the enqueue, claim, heartbeat or outcome path reports this script's table for
its commit against the one before it (CONTRIBUTING.md).

The sides share the venv: a commit that changed a dependency's version is measured with this
checkout's. ``jobledger``'s own figures read ``importlib.metadata``, which names this
checkout's version for both.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import string
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
FIGURES = (
    ("enqueue_jobs_per_s", "enqueue jobs/s", True),
    ("process_jobs_per_s", "end-to-end jobs/s", True),
    ("steady_jobs_per_s", "steady jobs/s", True),
    ("client_cpu_us_per_job", "worker CPU µs/job", False),
    ("host_cpu_us_per_job", "host CPU µs/job", False),
    ("wal_bytes_per_job", "WAL B/job", False),
    ("table_bytes_per_job", "table B/job", False),
    ("max_leased", "max leased", True),
)
"""(key in compare.py's JSON, label, whether higher is better)."""
WAKEUP = (("wakeup_p50_ms", "wake-up p50 ms"), ("wakeup_p95_ms", "wake-up p95 ms"))


def order(runs: int, sides: Sequence[str] = ("A", "B")) -> list[str]:
    """Each run measures every side once, forward then backward (A B, B A, A B, … or, for a
    bisect's points, A B C, C B A, …), so that every side is as often early as late."""
    found: list[str] = []
    for run in range(runs):
        found += sides if run % 2 == 0 else list(reversed(sides))
    return found


def materialise(rev: str, into: Path) -> Path:
    """The code of ``rev`` in a directory of its own (``.``: this checkout, as it is)."""
    if rev == ".":
        return ROOT
    sha = subprocess.run(
        ["git", "rev-parse", "--verify", f"{rev}^{{commit}}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    where = into / sha[:12]
    if not where.exists():
        archive = subprocess.run(
            ["git", "archive", "--format=tar", sha, "ledger", "projections"],
            cwd=ROOT,
            capture_output=True,
            check=True,
        ).stdout
        where.mkdir(parents=True)
        with tempfile.TemporaryFile() as tar_file:
            tar_file.write(archive)
            tar_file.seek(0)
            with tarfile.open(fileobj=tar_file) as tar:
                tar.extractall(where, filter="data")
    return where


def side_env(code: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(code), env.get("PYTHONPATH")]))
    return env


def check_side(code: Path) -> None:
    """The side's interpreter imports the side's ``ledger`` (not the installed one)."""
    found = subprocess.run(
        [sys.executable, "-c", "import ledger, projections; print(ledger.__file__)"],
        env=side_env(code),
        cwd=code,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    if not Path(found).resolve().is_relative_to(code.resolve()):
        raise SystemExit(f"{code}: the harness would import {found}, not this side's code")


def run_once(code: Path, seed: int, args: argparse.Namespace, out: Path) -> dict[str, Any]:
    command = [
        sys.executable,
        str(ROOT / "bench" / "compare.py"),
        "--only",
        "jobledger",
        "--rounds",
        "1",
        "--seed",
        str(seed),
        "--n",
        str(args.n),
        "--concurrency",
        str(args.concurrency),
        "--json",
        str(out),
    ]
    if args.depths:
        command += ["--depths", args.depths]
    done = subprocess.run(
        command, env=side_env(code), cwd=code, capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise SystemExit(f"compare.py failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
    result: dict[str, Any] = json.loads(out.read_text())
    return result


def figures(result: dict[str, Any]) -> dict[str, dict[str, float]]:
    """Each configuration's figures from one compare.py run (one round)."""
    found: dict[str, dict[str, float]] = {}
    for key, config in result["configs"].items():
        for round_ in config.get("rounds", []):
            values = {**round_.get("extra", {}), **round_}
            found[key] = {
                name: float(values[name])
                for name, *_ in (*FIGURES, *WAKEUP)
                if isinstance(values.get(name), int | float)
            }
    return found


def table(samples: dict[str, dict[str, dict[str, list[float]]]]) -> list[str]:
    """Per configuration, each figure's median per side (with min-max) and each later side's
    ratio to A."""
    sides = list(samples)
    first, later = sides[0], sides[1:]
    lines: list[str] = []
    for config in sorted(samples[first]):
        per_side = [samples[side].get(config, {}) for side in sides]
        runs = len(per_side[0].get("process_jobs_per_s", []))
        lines += ["", f"{config} ({runs} runs a side; medians, min-max)"]
        header = "".join(f" {side:>22}" for side in sides)
        header += "".join(f" {f'{side}/{first}':>7}" for side in later)
        lines.append(f"  {'figure':20}{header}")
        for name, label, *_ in (*FIGURES, *WAKEUP):
            values = [found.get(name) for found in per_side]
            if not all(values):
                continue
            medians = [statistics.median(v) for v in values if v]
            row = "".join(f" {_spread(v):>22}" for v in values if v)
            row += "".join(
                f" {m / medians[0]:7.3f}" if medians[0] else "       -" for m in medians[1:]
            )
            lines.append(f"  {label:20}{row}")
    return lines


def _spread(values: Sequence[float]) -> str:
    digits = 1 if statistics.median(values) < 100 else 0  # wake-up milliseconds
    low, mid, high = min(values), statistics.median(values), max(values)
    return f"{mid:,.{digits}f} ({low:,.{digits}f}-{high:,.{digits}f})"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "revs",
        nargs="+",
        metavar="REV",
        help="the commit before (A), then the one after (B; default '.', this checkout as it "
        "is), then any more to measure in the same run (a bisect's points: C, D, …)",
    )
    parser.add_argument("--runs", type=int, default=4, help="compare.py runs per side")
    parser.add_argument("--n", type=int, default=20_000)
    parser.add_argument("--concurrency", type=int, default=10)
    parser.add_argument("--depths", default="", help="compare.py's --depths (default its own)")
    parser.add_argument("--json", type=Path, default=None, help="every run's figures")
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    revs = args.revs if len(args.revs) > 1 else [*args.revs, "."]
    if len(revs) > len(string.ascii_uppercase):
        parser.error("at most 26 commits")
    names = dict(zip(string.ascii_uppercase, revs, strict=False))
    scratch = Path(tempfile.mkdtemp(prefix="jobledger-ab-"))
    try:
        sides = {side: materialise(rev, scratch) for side, rev in names.items()}
        for code in sides.values():
            check_side(code)
        samples: dict[str, dict[str, dict[str, list[float]]]] = {side: {} for side in sides}
        runs: list[dict[str, Any]] = []
        planned = order(args.runs, list(sides))
        for index, side in enumerate(planned):
            seed = index // len(sides) + 1
            result = run_once(sides[side], seed, args, scratch / f"{side}{index}.json")
            for config, values in figures(result).items():
                for name, value in values.items():
                    samples[side].setdefault(config, {}).setdefault(name, []).append(value)
            runs.append({"side": side, "seed": seed, "figures": figures(result)})
            load = os.getloadavg()[0]
            print(f"run {index + 1}/{len(planned)}: {side} done (load {load:.2f})", flush=True)
        print("\n" + ", ".join(f"{side} = {rev}" for side, rev in names.items()))
        print(
            f"compare.py --only jobledger, N={args.n}, C={args.concurrency}, {os.cpu_count()} CPUs"
        )
        print("\n".join(table(samples)))
        if args.json:
            args.json.parent.mkdir(parents=True, exist_ok=True)
            args.json.write_text(json.dumps({"sides": names, "runs": runs}, indent=1))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
