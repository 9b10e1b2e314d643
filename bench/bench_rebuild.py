"""Rebuild and verify throughput: ``projections rebuild --all`` and ``verify`` over N events.

Makes its own databases (PostgreSQL ``jl_bench_<random>``, dropped ``WITH (FORCE)`` even on
error; SQLite in a temporary directory), fills each with about ``--events`` events quickly
(``enqueue_many`` plus batched ``claim`` / ``succeed_many``, a few terminal failures for dead
letters, a few sync subjects), then times a full rebuild and a verify, with per-phase times.

    .venv/bin/python bench/bench_rebuild.py                      # 1,000,000 events, both
    .venv/bin/python bench/bench_rebuild.py --events 100000 --backends sqlite

``--db URL`` times an existing database instead (filled first if it has no events, never
dropped), ``--repeat N`` times it N times. To compare with older code on the same data, run
with ``PYTHONPATH=<a copy of the old ledger/ and projections/>``: the JSON names the code
directory it imported.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from time import perf_counter
from typing import Any

from scratch import scratch_database

import ledger as ledger_module
from ledger import Completion, EnqueueRequest, Failure, FailureKind, Ledger
from ledger.core.values import Subject

BATCH = 1000


class PhaseTimer:
    """A progress callback that records how long each phase took."""

    def __init__(self) -> None:
        self.phases: dict[str, float] = {}
        self._phase: str | None = None
        self._since = perf_counter()

    def __call__(self, phase: str, done: int, total: int) -> None:
        if phase != self._phase:
            self.close()
            self._phase, self._since = phase, perf_counter()

    def close(self) -> None:
        if self._phase is not None:
            elapsed = perf_counter() - self._since
            self.phases[self._phase] = self.phases.get(self._phase, 0.0) + elapsed
            self._phase = None


def fill(ledger: Ledger, events: int) -> int:
    """Append about ``events`` events: 3 per job (enqueued, leased, succeeded or failed)."""
    ledger.define("bench", max_attempts=1)
    made = 1
    round_no = 0
    while made < events:
        n = min(BATCH, max(1, (events - made) // 3))
        requests = [EnqueueRequest(job_type="bench", payload={"i": i}) for i in range(n)]
        if round_no % 10 == 0:  # a few sync subjects, for the sync-state view
            requests[0] = EnqueueRequest(
                job_type="bench", subject=Subject(source_id="s", uri=f"doc-{round_no}")
            )
        ledger.enqueue_many(requests)
        jobs = ledger.claim("bench-worker", limit=n, lease_s=600)
        leases = [job.lease for job in jobs if job.lease is not None]
        if round_no % 10 == 5 and leases:  # a few dead letters
            ledger.fail(leases.pop(), Failure(kind=FailureKind.TERMINAL, code="x", message="m"))
            made += 2
        ledger.succeed_many([Completion(lease=lease, revision="r1") for lease in leases])
        made += n + len(jobs) + len(leases)
        round_no += 1
    return ledger.store.head_position()


def run(backend: str, url: str, events: int, repeat: int) -> list[dict[str, Any]]:
    results = []
    with Ledger.open(url, create=True, pool_size=2) as ledger:
        head = ledger.store.head_position()
        fill_s = 0.0
        if head == 0:
            started = perf_counter()
            head = fill(ledger, events)
            fill_s = perf_counter() - started
            print(f"{backend}: {head:,} events appended in {fill_s:.1f}s", file=sys.stderr)
        for _ in range(repeat):
            results.append(timed(backend, ledger, fill_s))
            print(summary(results[-1]), file=sys.stderr)
    return results


def timed(backend: str, ledger: Ledger, fill_s: float) -> dict[str, Any]:
    load = Path("/proc/loadavg").read_text().split()[0] if Path("/proc/loadavg").exists() else "?"
    timer = PhaseTimer()
    report = ledger.projections(progress=timer).rebuild()
    timer.close()
    rebuild_phases = timer.phases
    timer = PhaseTimer()
    started = perf_counter()
    verified = ledger.projections(progress=timer).verify()
    verify_s = perf_counter() - started
    timer.close()
    assert verified.clean, "verify found drift after a rebuild"
    return {
        "backend": backend,
        "code": os.path.dirname(os.path.dirname(os.path.abspath(ledger_module.__file__))),
        "loadavg_before": load,
        "events": report.events,
        "rows": report.rows,
        "fill_s": round(fill_s, 2),
        "rebuild_s": round(report.seconds, 2),
        "rebuild_events_per_s": round(report.events / report.seconds),
        "rebuild_phases_s": {k: round(v, 2) for k, v in rebuild_phases.items()},
        "verify_s": round(verify_s, 2),
        "verify_events_per_s": round(verified.events / verify_s),
        "verify_phases_s": {k: round(v, 2) for k, v in timer.phases.items()},
    }


def summary(result: dict[str, Any]) -> str:
    return (
        f"{result['backend']:8}  {result['events']:>9,} events  "
        f"rebuild {result['rebuild_s']:6.1f}s = {result['rebuild_events_per_s']:>7,}/s  "
        f"verify {result['verify_s']:6.1f}s = {result['verify_events_per_s']:>7,}/s  "
        f"(load {result['loadavg_before']})\n"
        f"          rebuild phases: {result['rebuild_phases_s']}\n"
        f"          verify phases:  {result['verify_phases_s']}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--backends", default="postgres,sqlite")
    parser.add_argument("--pg-server", default="postgresql://postgres@127.0.0.1:5432")
    parser.add_argument("--json", default="bench/results/rebuild.json")
    parser.add_argument("--db", help="time this database (filled if empty, never dropped)")
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args()
    results = []
    for backend in [] if args.db else args.backends.split(","):
        with scratch_database(backend, args.pg_server) as url:
            results += run(backend, url, args.events, args.repeat)
    if args.db:
        backend = "postgres" if args.db.startswith("postgres") else "sqlite"
        results += run(backend, args.db, args.events, args.repeat)
    for result in results:
        print(summary(result))
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
