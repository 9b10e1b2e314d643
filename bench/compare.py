"""jobledger side by side with its Python peers, on one PostgreSQL server, in one run.

For every system it measures, with the system's own fastest documented APIs and settings
(bench/COMPARE.md says which): bulk enqueue of N no-op jobs (jobs/s), end-to-end processing of
those jobs by the system's own async worker in one process at concurrency C (jobs/s, worker
start to last completion, verified by counting finished jobs in the system's own tables: a
lost job fails the run), and the history rows per job it keeps. For jobledger also events/s
and the cross-process wake-up latency (p50/p95).

Systems are interleaved (A B C A B C …) for ``--rounds`` rounds and medians reported, so that
a drift of the machine (autovacuum, page cache, a noisy neighbour) hits all alike. Each
measurement runs in a fresh process of its own, against a fresh database of its own
(``CREATE DATABASE`` before, ``DROP DATABASE … WITH (FORCE)`` after, even on error).

    .venv/bin/pip install -e '.[bench]'
    .venv/bin/python bench/compare.py [--n 20000] [--concurrency 10] [--rounds 3]
        [--only jobledger,pgqueuer,...] [--json bench/results/compare.json]
        [--pg-server postgresql://postgres@127.0.0.1:5432]

oban-py needs Python >= 3.12: it runs from bench/.venv-oban, made on first use from the first
such interpreter found; without one it is skipped and the output says so.
"""

from __future__ import annotations

import argparse
import glob
import importlib.util
import json
import os
import platform
import secrets
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import psycopg

BENCH_DIR = Path(__file__).resolve().parent
PEERS_DIR = BENCH_DIR / "peers"
DEFAULT_JSON = BENCH_DIR / "results" / "compare.json"
DEFAULT_SERVER = "postgresql://postgres@127.0.0.1:5432"
RESULT_MARK = "COMPARE-RESULT "  # the line prefix peers/harness.py prints
OBAN_VENV = BENCH_DIR / ".venv-oban"
# oban-py is installed into its own environment, so its pin lives here, not in pyproject.toml.
OBAN_REQUIREMENT = "oban==0.7.0"
# One measurement (enqueue + process + verify) may not take longer than this: far above any
# peer's worst case at the defaults, it only stops a wedged run from hanging for ever.
ADAPTER_TIMEOUT_S = 3600
REFERENCE = "jobledger"


@dataclass(frozen=True)
class System:
    name: str
    label: str
    script: str
    variant: str = "default"
    module: str = ""  # what must be importable in the project's environment ("" = nothing)
    oban_env: bool = False  # run from bench/.venv-oban instead of the project's environment


SYSTEMS: tuple[System, ...] = (
    System("jobledger", "jobledger", "jobledger_adapter.py", module="ledger.runtime.pool"),
    System("pgqueuer", "PgQueuer (≤ C in flight)", "pgqueuer_adapter.py", "capped", "pgqueuer"),
    System(
        "pgqueuer-unbounded",
        "PgQueuer (no in-flight cap)",
        "pgqueuer_adapter.py",
        "unbounded",
        "pgqueuer",
    ),
    System("procrastinate", "procrastinate", "procrastinate_adapter.py", module="procrastinate"),
    System("awa-pg", "awa-pg", "awa_adapter.py", module="awa"),
    System("oban-py", "oban-py", "oban_adapter.py", oban_env=True),
)
BY_NAME = {system.name: system for system in SYSTEMS}

# The medians in the table (key in the adapters' result, column title).
FIGURES: tuple[tuple[str, str], ...] = (
    ("enqueue_jobs_per_s", "enqueue jobs/s"),
    ("process_jobs_per_s", "process jobs/s"),
    ("history_rows_per_job", "history rows/job"),
)
EXTRA_FIGURES = ("events_per_s", "wakeup_p50_ms", "wakeup_p95_ms")


@dataclass
class Outcome:
    """Everything one system produced over the rounds."""

    system: System
    rounds: list[dict[str, Any]] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    skipped: str | None = None

    def median(self, key: str) -> float | None:
        values = [r[key] for r in self.rounds if key in r]
        values += [r["extra"][key] for r in self.rounds if key in r.get("extra", {})]
        return statistics.median(values) if values else None


# --- environment -----------------------------------------------------------------------------


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def missing_modules(systems: Sequence[System]) -> list[str]:
    """Peers not installed in this environment (without importing them)."""
    missing = []
    for system in systems:
        if not system.module:
            continue
        try:
            found = importlib.util.find_spec(system.module) is not None
        except ModuleNotFoundError:  # a parent package is missing
            found = False
        if not found:
            missing.append(f"{system.name} (module {system.module})")
    return missing


def python_at_least_312(python: str) -> bool:
    try:
        done = subprocess.run(
            [python, "-c", "import sys; print(sys.version_info >= (3, 12))"],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.stdout.strip() == "True"


def find_python_312() -> str | None:
    """The first Python >= 3.12 on PATH or under pyenv, oldest minor version first (3.12 is
    the version oban-py was verified with here)."""
    candidates = [shutil.which(f"python3.{minor}") for minor in range(12, 21)]
    pyenv_root = os.environ.get("PYENV_ROOT", str(Path.home() / ".pyenv"))
    candidates += sorted(glob.glob(f"{pyenv_root}/versions/3.1[2-9]*/bin/python"))
    for candidate in candidates:
        if candidate and python_at_least_312(candidate):
            return candidate
    return None


def oban_python() -> tuple[str | None, str]:
    """The oban environment's interpreter (made on first use), or None and why not."""
    python = OBAN_VENV / "bin" / "python"
    check = [str(python), "-c", "import oban, psycopg, uvloop"]
    if python.exists() and subprocess.run(check, capture_output=True, check=False).returncode == 0:
        return str(python), str(OBAN_VENV)
    base = find_python_312()
    if base is None:
        return None, "no Python >= 3.12 found on PATH or under pyenv (oban-py requires it)"
    log(f"making {OBAN_VENV} with {base} and installing {OBAN_REQUIREMENT} …")
    steps = [
        [base, "-m", "venv", str(OBAN_VENV)],
        [str(python), "-m", "pip", "install", "--quiet", OBAN_REQUIREMENT],
    ]
    for step in steps:
        done = subprocess.run(step, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            return None, f"could not prepare {OBAN_VENV}: {done.stderr.strip()[-500:]}"
    return str(python), f"{OBAN_VENV} ({base})"


# --- databases -------------------------------------------------------------------------------


def database_url(server: str, name: str) -> str:
    # URL form (not key=value): awa's Rust driver accepts only URLs.
    return urlsplit(server)._replace(path=f"/{name}").geturl()


@contextmanager
def fresh_database(server: str, label: str) -> Iterator[str]:
    """A database of its own for one measurement, dropped afterwards whatever happens."""
    name = f"jl_cmp_{label.replace('-', '_')}_{secrets.token_hex(4)}"
    admin = database_url(server, "postgres")
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield database_url(server, name)
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def server_facts(server: str) -> dict[str, str]:
    try:
        conn = psycopg.connect(database_url(server, "postgres"), autocommit=True)
    except psycopg.OperationalError as exc:
        raise SystemExit(f"cannot reach PostgreSQL at {server}: {exc}") from exc
    with conn:
        facts = {
            setting: str(conn.execute(f"SHOW {setting}").fetchone()[0])  # type: ignore[index]
            for setting in ("server_version", "synchronous_commit", "fsync", "max_connections")
        }
    return facts


# --- one measurement -------------------------------------------------------------------------


@dataclass(frozen=True)
class Plan:
    server: str
    n: int
    concurrency: int
    wakeup_samples: int
    pythons: dict[str, str]  # system name -> interpreter
    pgqueuer_batch: int | None = None


def command(plan: Plan, system: System, url: str) -> list[str]:
    batch = ["--batch", str(plan.pgqueuer_batch)] if plan.pgqueuer_batch else []
    return [
        plan.pythons[system.name],
        str(PEERS_DIR / system.script),
        "--url",
        url,
        "--n",
        str(plan.n),
        "--concurrency",
        str(plan.concurrency),
        "--variant",
        system.variant,
        "--wakeup-samples",
        str(plan.wakeup_samples),
        *batch,
    ]


def parse_result(stdout: str) -> dict[str, Any] | None:
    for line in reversed(stdout.splitlines()):
        if line.startswith(RESULT_MARK):
            result: dict[str, Any] = json.loads(line[len(RESULT_MARK) :])
            return result
    return None


def measure(plan: Plan, system: System) -> dict[str, Any]:
    """Run one system's adapter in a fresh process on a fresh database; its result or raise."""
    with fresh_database(plan.server, system.name) as url:
        try:
            done = subprocess.run(
                command(plan, system, url),
                capture_output=True,
                text=True,
                timeout=ADAPTER_TIMEOUT_S,
                check=False,
            )
        except subprocess.TimeoutExpired as exc:
            raise RuntimeError(f"timed out after {ADAPTER_TIMEOUT_S} s") from exc
    result = parse_result(done.stdout)
    if done.returncode != 0 or result is None:
        tail = "\n".join((done.stderr or done.stdout).strip().splitlines()[-15:])
        raise RuntimeError(f"exit code {done.returncode}\n{tail}")
    return result


def describe(result: dict[str, Any]) -> str:
    text = (
        f"enqueue {result['enqueue_jobs_per_s']:,.0f}/s, "
        f"process {result['process_jobs_per_s']:,.0f}/s ({result['process_s']:.1f} s), "
        f"{result['history_rows_per_job']:.2f} history rows/job"
    )
    extra = result.get("extra", {})
    if "wakeup_p50_ms" in extra:
        text += (
            f", {extra['events_per_s']:,.0f} events/s, wake-up p50 "
            f"{extra['wakeup_p50_ms']:.1f} ms p95 {extra['wakeup_p95_ms']:.1f} ms"
        )
    return text


def run_rounds(plan: Plan, outcomes: list[Outcome], rounds: int) -> None:
    """A B C A B C …: every round measures every system once, in the same order."""
    active = [o for o in outcomes if o.skipped is None]
    for number in range(1, rounds + 1):
        for outcome in active:
            where = f"[round {number}/{rounds}] {outcome.system.name}"
            started = time.perf_counter()
            try:
                result = measure(plan, outcome.system)
            except Exception as exc:
                # Keep going: the other systems' figures are still worth having, and the run
                # still fails (non-zero exit, FAILED lines in the report).
                outcome.failures.append(f"round {number}: {exc}")
                log(f"{where}: FAILED: {exc}")
                continue
            outcome.rounds.append(result)
            log(f"{where}: {describe(result)} [{time.perf_counter() - started:.0f} s]")


# --- report ----------------------------------------------------------------------------------


def fmt(value: float | None, key: str) -> str:
    if value is None:
        return "—"
    return f"{value:.2f}" if key == "history_rows_per_job" else f"{value:,.0f}"


def ratio(reference: float | None, value: float | None) -> str:
    if reference is None or not value:
        return "—"
    return f"{reference / value:.2f}x"


def table(outcomes: Sequence[Outcome]) -> str:
    """Medians, and jobledger's figure divided by each peer's (above 1: jobledger higher)."""
    ref = next((o for o in outcomes if o.system.name == REFERENCE and o.rounds), None)
    header = ["system", "rounds"]
    for _, title in FIGURES:
        header += [title, "jl x"]
    rows = [header]
    for outcome in outcomes:
        if not outcome.rounds:
            continue
        row = [outcome.system.label, str(len(outcome.rounds))]
        for key, _ in FIGURES:
            value = outcome.median(key)
            versus = "—" if ref is None or outcome is ref else ratio(ref.median(key), value)
            row += [fmt(value, key), versus]
        rows.append(row)
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    lines = [
        "  ".join(
            cell.ljust(w) if i == 0 else cell.rjust(w)
            for i, (cell, w) in enumerate(zip(row, widths, strict=True))
        )
        for row in rows
    ]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def reference_lines(outcomes: Sequence[Outcome], plan: Plan) -> list[str]:
    ref = next((o for o in outcomes if o.system.name == REFERENCE and o.rounds), None)
    if ref is None:
        return []
    events = fmt(ref.median("events_per_s"), "events_per_s")
    text = f"jobledger: {events} job events/s while processing"
    p50, p95 = ref.median("wakeup_p50_ms"), ref.median("wakeup_p95_ms")
    if p50 is not None and p95 is not None:
        text += (
            f"; cross-process wake-up p50 {p50:.1f} ms, p95 {p95:.1f} ms "
            f"(medians of {len(ref.rounds)} rounds x {plan.wakeup_samples} samples)"
        )
    return [text]


def goal_lines(outcomes: Sequence[Outcome]) -> list[str]:
    """Issue 7's bar, checked against the medians (only what this run measured)."""
    by_name = {o.system.name: o for o in outcomes if o.rounds}
    ref = by_name.get(REFERENCE)
    if ref is None:
        return []
    peers = [o for name, o in by_name.items() if name != REFERENCE]
    checks: list[tuple[str, bool]] = []
    process = ref.median("process_jobs_per_s") or 0.0
    capped = by_name.get("pgqueuer")
    if capped:
        checks.append(
            (
                "end-to-end ≥ 2x PgQueuer at equal concurrency",
                process >= 2 * (capped.median("process_jobs_per_s") or 0),
            )
        )
    if peers:
        fastest = max(peers, key=lambda o: o.median("process_jobs_per_s") or 0)
        checks.append(
            (
                f"end-to-end ahead of every peer (fastest: {fastest.system.label})",
                process > (fastest.median("process_jobs_per_s") or 0),
            )
        )
        enqueue = ref.median("enqueue_jobs_per_s") or 0.0
        bulk = max(peers, key=lambda o: o.median("enqueue_jobs_per_s") or 0)
        checks.append(
            (
                f"bulk enqueue ≥ the fastest peer's ({bulk.system.label})",
                enqueue >= (bulk.median("enqueue_jobs_per_s") or 0),
            )
        )
    checks.append(("≥ 3 durable events per job", (ref.median("history_rows_per_job") or 0) >= 3))
    checks.append(("cross-process wake-up p50 < 20 ms", (ref.median("wakeup_p50_ms") or 1e9) < 20))
    return [f"  [{'met' if ok else 'NOT met'}] {text}" for text, ok in checks]


def report(outcomes: Sequence[Outcome], plan: Plan, facts: dict[str, str]) -> str:
    lines = [
        f"N={plan.n:,} no-op jobs, concurrency C={plan.concurrency}, PostgreSQL "
        f"{facts['server_version']} (synchronous_commit={facts['synchronous_commit']}, "
        f"fsync={facts['fsync']}), {os.cpu_count()} CPUs; medians over the rounds",
        "",
        table(outcomes),
        "",
        *reference_lines(outcomes, plan),
    ]
    if any(o.rounds for o in outcomes):
        lines += ["", "Settings (bench/COMPARE.md says why):"]
    lines += [
        f"  {o.system.name} {o.rounds[0]['version']}: "
        + ", ".join(f"{k}={v}" for k, v in o.rounds[0]["settings"].items())
        for o in outcomes
        if o.rounds
    ]
    goals = goal_lines(outcomes)
    if goals:
        lines += ["", "Issue 7 goals:", *goals]
    for outcome in outcomes:
        if outcome.skipped:
            lines.append(f"{outcome.system.name}: skipped: {outcome.skipped}")
        for failure in outcome.failures:
            lines.append(f"{outcome.system.name}: FAILED {failure}")
    return "\n".join(lines)


def to_json(
    outcomes: Sequence[Outcome], plan: Plan, facts: dict[str, str], rounds: int
) -> dict[str, Any]:
    keys = [key for key, _ in FIGURES] + list(EXTRA_FIGURES)
    return {
        "when_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "n": plan.n,
        "concurrency": plan.concurrency,
        "rounds": rounds,
        "wakeup_samples": plan.wakeup_samples,
        "server": facts,
        "machine": {
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
            "python": platform.python_version(),
        },
        "systems": {
            o.system.name: {
                "label": o.system.label,
                "skipped": o.skipped,
                "failures": o.failures,
                "median": {k: v for k in keys if (v := o.median(k)) is not None},
                "rounds": o.rounds,
            }
            for o in outcomes
        },
    }


# --- main ------------------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--n", type=int, default=20_000, help="jobs per system per round")
    parser.add_argument("--concurrency", type=int, default=10, help="worker concurrency C")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--only", default="", help=f"comma-separated subset of: {', '.join(BY_NAME)}"
    )
    parser.add_argument("--json", type=Path, default=DEFAULT_JSON)
    parser.add_argument("--pg-server", default=DEFAULT_SERVER, help="server URL, no database")
    parser.add_argument("--wakeup-samples", type=int, default=50, help="jobledger wake-ups")
    parser.add_argument(
        "--pgqueuer-batch",
        type=int,
        default=None,
        help="batch_size of the uncapped PgQueuer configuration (default 25, its docs' example)",
    )
    args = parser.parse_args(argv)
    unknown = [name for name in filter(None, args.only.split(",")) if name not in BY_NAME]
    if unknown:
        parser.error(f"unknown system(s) {', '.join(unknown)}; choose from {', '.join(BY_NAME)}")
    if min(args.n, args.concurrency, args.rounds) < 1:
        parser.error("--n, --concurrency and --rounds must be at least 1")
    return args


def select(only: str) -> list[System]:
    names = [name for name in only.split(",") if name]
    return [s for s in SYSTEMS if not names or s.name in names]


def prepare(systems: Sequence[System]) -> tuple[list[Outcome], dict[str, str]]:
    """Outcome slots, with oban-py skipped (and why) when no Python >= 3.12 is found."""
    missing = missing_modules(systems)
    if missing:
        raise SystemExit(
            "not installed here: " + ", ".join(missing) + "\n"
            "install the peers with: .venv/bin/pip install -e '.[bench]'"
        )
    outcomes, pythons = [], {}
    for system in systems:
        outcome = Outcome(system)
        if system.oban_env:
            python, note = oban_python()
            if python is None:
                outcome.skipped = note
            else:
                pythons[system.name] = python
                log(f"oban-py runs from {note}")
        else:
            pythons[system.name] = sys.executable
        outcomes.append(outcome)
    return outcomes, pythons


def main(argv: Sequence[str] | None = None, out: Callable[[str], None] = print) -> int:
    args = parse_args(argv)
    facts = server_facts(args.pg_server)
    if facts["synchronous_commit"] != "on" or facts["fsync"] != "on":
        log(f"WARNING: the server does not run with default durability: {facts}")
    outcomes, pythons = prepare(select(args.only))
    plan = Plan(
        args.pg_server, args.n, args.concurrency, args.wakeup_samples, pythons, args.pgqueuer_batch
    )
    run_rounds(plan, outcomes, args.rounds)

    out(report(outcomes, plan, facts))
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(to_json(outcomes, plan, facts, args.rounds), indent=2) + "\n")
    out(f"\nJSON: {args.json}")
    return 1 if any(o.failures for o in outcomes) else 0


if __name__ == "__main__":
    sys.exit(main())
