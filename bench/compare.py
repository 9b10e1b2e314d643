"""jobledger side by side with its Python peers, on one PostgreSQL server, in one run.

For every configuration of every system (``compare_configs``: each at a declared claim depth,
jobledger at the same depths), with the system's own fastest documented APIs and settings
(bench/COMPARE.md says which), it measures:
- bulk enqueue of N no-op jobs, payload ``{"i": i}`` for all (jobs/s);
- end-to-end processing of those jobs by the system's own async worker in one process (jobs/s,
  worker start to last completion, verified by counting finished jobs in the system's own
  tables: a lost job fails the run), and the steady-state rate between the 10% and the 90%
  completion;
- the claim depth reached: most jobs leased at once, jobs per claim, jobs per completion flush;
- what durability costs: WAL bytes and table + index bytes per job; history rows (past
  transitions) and state rows per job;
- the load average at the end of each drain.
Then jobledger against each peer's best configuration at the same depth, and issue 13's goals.

Every round measures every configuration once, in an order shuffled per round (seeded; the
seed and the orders are printed), so that a drift of the machine (autovacuum, page cache, a
noisy neighbour) hits all alike; medians are reported with the rounds' min-max. Each
measurement runs in a fresh process of its own, against a fresh database of its own (``CREATE
DATABASE`` before, ``DROP DATABASE … WITH (FORCE)`` after, even on error), after an untimed
``CHECKPOINT``; durability is checked before and after (``compare_server``).

    .venv/bin/pip install -e '.[bench]'
    .venv/bin/python bench/compare.py [--n 20000] [--concurrency 10] [--rounds 3] [--sweep]
        [--depths 10,110] [--only jobledger,pgqueuer,...] [--seed S]
        [--json bench/results/compare.json] [--pg-server postgresql://postgres@127.0.0.1:5432]

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
import random
import secrets
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from compare_configs import (
    BY_NAME,
    DEEP_FACTOR,
    REFERENCE,
    SYSTEMS,
    Config,
    System,
    default_depths,
    plan_configs,
)
from compare_report import (
    Outcome,
    best_table,
    cost_table,
    cpu_table,
    enqueue_table,
    goal_lines,
    outcome_json,
    pairings,
    settings_lines,
    throughput_table,
    wakeup_line,
)
from compare_server import (
    DurabilityError,
    check_database,
    check_server,
    fresh_database,
    server_facts,
    wal,
    wal_kept,
)

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


# --- one measurement -------------------------------------------------------------------------


@dataclass(frozen=True)
class Plan:
    server: str
    n: int
    concurrency: int
    wakeup_samples: int
    pythons: dict[str, str]  # system name -> interpreter
    wakeup_config: str  # the one jobledger configuration that also measures wake-ups


def command(plan: Plan, config: Config, url: str) -> list[str]:
    samples = plan.wakeup_samples if config.key == plan.wakeup_config else 0
    return [
        plan.pythons[config.system.name],
        str(PEERS_DIR / config.system.script),
        "--url",
        url,
        "--n",
        str(plan.n),
        "--settings",
        json.dumps(config.options),
        "--wakeup-samples",
        str(samples),
    ]


def parse_result(stdout: str) -> dict[str, Any] | None:
    for line in reversed(stdout.splitlines()):
        if line.startswith(RESULT_MARK):
            result: dict[str, Any] = json.loads(line[len(RESULT_MARK) :])
            return result
    return None


def measure(plan: Plan, config: Config) -> dict[str, Any]:
    """Run one configuration's adapter in a fresh process on a fresh database, check what it
    left behind, and account its WAL; its result, or raise."""
    started = time.perf_counter()
    with fresh_database(plan.server, config.system.name) as url, wal_kept(plan.server) as kept:
        try:
            done = subprocess.run(
                command(plan, config, url),
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
        result["unlogged_tables"] = check_database(url, config.system.name)
        result |= wal(url, result["probe"]["lsn"]).as_json()
    result["wal_kept"] = kept
    result["wal_bytes_per_job"] = result["wal_bytes"] / plan.n
    result["wal_bytes_raw_per_job"] = result["wal_bytes_raw"] / plan.n
    result["wall_s"] = time.perf_counter() - started
    return result


def describe(result: dict[str, Any]) -> str:
    depth = (
        f"leased ≤ {result['max_leased']:,}, {result['claim_jobs_mean']:.1f}/claim, "
        f"{result['flush_jobs_mean']:.1f}/flush"
        if result["max_leased"] is not None
        else f"depth not measured (completions of {result['depth']['covered']:,} jobs left)"
    )
    text = (
        f"process {result['process_jobs_per_s']:,.0f}/s ({result['process_s']:.1f} s, "
        f"steady {result['steady_jobs_per_s']:,.0f}/s), enqueue "
        f"{result['enqueue_jobs_per_s']:,.0f}/s, {depth}, "
        f"WAL {result['wal_bytes_per_job']:,.0f} B/job, "
        f"tables {result['table_bytes_per_job']:,.0f} B/job, load {result['load_1m']:.1f}"
    )
    if not result["wal_attributed"]:
        text += " (WAL not attributable: the server's whole LSN difference)"
    extra = result.get("extra", {})
    if "wakeup_p50_ms" in extra:
        text += f", wake-up p50 {extra['wakeup_p50_ms']:.1f} ms p95 {extra['wakeup_p95_ms']:.1f} ms"
    return text


def run_rounds(
    plan: Plan, outcomes: list[Outcome], rounds: int, rng: random.Random
) -> list[list[str]]:
    """Every round measures every configuration once, in an order of its own; the orders."""
    active = [o for o in outcomes if o.skipped is None]
    orders = []
    for number in range(1, rounds + 1):
        order = active[:]
        rng.shuffle(order)
        orders.append([o.config.key for o in order])
        log(f"[round {number}/{rounds}] order: " + ", ".join(o.config.label for o in order))
        for outcome in order:
            where = f"[round {number}/{rounds}] {outcome.config.label}"
            try:
                result = measure(plan, outcome.config)
            except Exception as exc:
                # Keep going: the other systems' figures are still worth having, and the run
                # still fails (non-zero exit, FAILED lines in the report).
                outcome.failures.append(f"round {number}: {exc}")
                log(f"{where}: FAILED: {exc}")
                continue
            outcome.rounds.append(result)
            log(f"{where}: {describe(result)} [{result['wall_s']:.0f} s]")
    return orders


# --- report ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class RunFacts:
    server: dict[str, str]
    seed: int
    rounds: int
    sweep: bool
    depths: tuple[int, ...]
    elapsed_s: float


def timing_line(outcomes: Sequence[Outcome], facts: RunFacts) -> str:
    per_system: dict[str, list[float]] = {}
    for o in outcomes:
        per_system.setdefault(o.config.system.name, []).extend(o.values("wall_s"))
    parts = [
        f"{name} {statistics.mean(walls):.0f} s" for name, walls in per_system.items() if walls
    ]
    return (
        f"The run took {facts.elapsed_s / 60:.1f} min; one measurement (fresh database, "
        f"enqueue, drain, checks, WAL accounting) took on average: {', '.join(parts)}"
    )


def report(outcomes: Sequence[Outcome], plan: Plan, facts: RunFacts) -> str:
    server = facts.server
    pairs = pairings(outcomes)
    lines = [
        f'N={plan.n:,} no-op jobs (payload {{"i": i}}), concurrency C={plan.concurrency}, '
        f"declared depths {', '.join(f'{d:,}' for d in facts.depths)}"
        f"{' + sweep' if facts.sweep else ''}; PostgreSQL {server['server_version']} "
        f"(synchronous_commit={server['synchronous_commit']}, fsync={server['fsync']}, "
        f"full_page_writes={server['full_page_writes']}), {os.cpu_count()} CPUs; "
        f"{facts.rounds} rounds, order shuffled per round (seed {facts.seed}); "
        "medians (min-max)",
        "",
        "Throughput (depth: the declared claim depth):",
        throughput_table(outcomes),
        "",
        "Depth reached and what durability costs (WAL and tables: per job, this database's):",
        cost_table(outcomes),
        "",
        "CPU over the drain, per job (client: the system's worker process; host: every core,",
        f"the server's work included; busy cores: host CPU over wall time, of {os.cpu_count()}):",
        cpu_table(outcomes),
        "",
        "Bulk enqueue, every measurement of a system pooled:",
        enqueue_table(outcomes),
    ]
    if pairs:
        lines += [
            "",
            "jobledger against each peer's best configuration (by median end-to-end jobs/s):",
            "jobledger at the same declared depth (for an uncapped peer: the deepest one not",
            "deeper than the peer reached), and the fastest jobledger one that held no more",
            "jobs leased than the peer did; ratios jobledger ÷ peer:",
            best_table(pairs),
        ]
    lines += ["", *wakeup_line(outcomes, plan.wakeup_samples)]
    settings = settings_lines(outcomes)
    if settings:
        lines += ["Fixed settings (bench/COMPARE.md says why):", *settings]
    goals = goal_lines(outcomes, pairs, plan.concurrency)
    if goals:
        header = f"Issue 13 goals at C={plan.concurrency} (it asks for C=10 and C=50: a run each):"
        lines += ["", header, *goals]
    lines += ["", timing_line(outcomes, facts)]
    for outcome in outcomes:
        if outcome.skipped:
            lines.append(f"{outcome.config.label}: skipped: {outcome.skipped}")
        for failure in outcome.failures:
            lines.append(f"{outcome.config.label}: FAILED {failure}")
    return "\n".join(lines)


def to_json(
    outcomes: Sequence[Outcome], plan: Plan, facts: RunFacts, orders: list[list[str]]
) -> dict[str, Any]:
    return {
        "when_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "n": plan.n,
        "concurrency": plan.concurrency,
        "depths": list(facts.depths),
        "sweep": facts.sweep,
        "rounds": facts.rounds,
        "seed": facts.seed,
        "orders": orders,
        "elapsed_s": facts.elapsed_s,
        "wakeup_samples": plan.wakeup_samples,
        "wakeup_config": plan.wakeup_config,
        "server": facts.server,
        "machine": {
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
            "python": platform.python_version(),
        },
        "configs": {o.config.key: outcome_json(o) for o in outcomes},
        "versus_best": [pair.as_json() for pair in pairings(outcomes)],
    }


# --- main ------------------------------------------------------------------------------------


def depths_arg(text: str) -> tuple[int, ...]:
    values = tuple(sorted({int(part) for part in text.split(",") if part.strip()}))
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError("depths are positive integers, comma-separated")
    return values


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--n", type=int, default=20_000, help="jobs per measurement")
    parser.add_argument("--concurrency", type=int, default=10, help="jobledger's slots C")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--depths",
        type=depths_arg,
        default=None,
        help=f"declared claim depths, comma-separated (default: C and {DEEP_FACTOR}·C)",
    )
    parser.add_argument(
        "--sweep", action="store_true", help="also each peer's documented throughput knobs"
    )
    parser.add_argument(
        "--only", default="", help=f"comma-separated subset of: {', '.join(BY_NAME)}"
    )
    parser.add_argument("--seed", type=int, default=None, help="of the per-round shuffle")
    parser.add_argument("--json", type=Path, default=DEFAULT_JSON)
    parser.add_argument("--pg-server", default=DEFAULT_SERVER, help="server URL, no database")
    parser.add_argument("--wakeup-samples", type=int, default=50, help="jobledger wake-ups")
    args = parser.parse_args(argv)
    unknown = [name for name in filter(None, args.only.split(",")) if name not in BY_NAME]
    if unknown:
        parser.error(f"unknown system(s) {', '.join(unknown)}; choose from {', '.join(BY_NAME)}")
    if min(args.n, args.concurrency, args.rounds) < 1:
        parser.error("--n, --concurrency and --rounds must be at least 1")
    args.depths = args.depths or default_depths(args.concurrency)
    if min(args.depths) < args.concurrency:
        parser.error("every depth must be at least --concurrency (jobledger runs C slots)")
    return args


def prepare(configs: Sequence[Config]) -> tuple[list[Outcome], dict[str, str]]:
    """Outcome slots, with oban-py skipped (and why) when no Python >= 3.12 is found."""
    systems = list(dict.fromkeys(c.system for c in configs))
    missing = missing_modules(systems)
    if missing:
        raise SystemExit(
            "not installed here: " + ", ".join(missing) + "\n"
            "install the peers with: .venv/bin/pip install -e '.[bench]'"
        )
    pythons, skipped = {}, {}
    for system in systems:
        if system.oban_env:
            python, note = oban_python()
            if python is None:
                skipped[system.name] = note
            else:
                pythons[system.name] = python
                log(f"oban-py runs from {note}")
        else:
            pythons[system.name] = sys.executable
    outcomes = [Outcome(c, skipped=skipped.get(c.system.name)) for c in configs]
    return outcomes, pythons


def wakeup_config(configs: Sequence[Config], concurrency: int) -> str:
    """jobledger at its default depth measures the wake-up latency (once per round is enough:
    the idle pool's latency does not depend on the prefetch)."""
    ours = [c for c in configs if c.system.name == REFERENCE]
    default = [c for c in ours if c.depth == DEEP_FACTOR * concurrency]
    chosen = default or ours
    return chosen[0].key if chosen else ""


def main(argv: Sequence[str] | None = None, out: Callable[[str], None] = print) -> int:
    args = parse_args(argv)
    started = time.perf_counter()
    server = server_facts(args.pg_server)
    if server["synchronous_commit"] != "on" or server["fsync"] != "on":
        log(f"WARNING: the server does not run with default durability: {server}")
    try:
        check_server(args.pg_server)
    except DurabilityError as exc:
        raise SystemExit(f"refusing to compare: {exc}") from exc
    names = [name for name in args.only.split(",") if name] or [s.name for s in SYSTEMS]
    configs = plan_configs(args.concurrency, args.depths, args.sweep, names)
    outcomes, pythons = prepare(configs)
    seed = args.seed if args.seed is not None else secrets.randbelow(2**31)
    log(f"{len(configs)} configurations x {args.rounds} rounds; shuffle seed {seed}")
    plan = Plan(
        args.pg_server,
        args.n,
        args.concurrency,
        args.wakeup_samples,
        pythons,
        wakeup_config(configs, args.concurrency),
    )
    orders = run_rounds(plan, outcomes, args.rounds, random.Random(seed))

    facts = RunFacts(
        server, seed, args.rounds, args.sweep, args.depths, time.perf_counter() - started
    )
    out(report(outcomes, plan, facts))
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(to_json(outcomes, plan, facts, orders), indent=2) + "\n")
    out(f"\nJSON: {args.json}")
    return 1 if any(o.failures for o in outcomes) else 0


if __name__ == "__main__":
    sys.exit(main())
