"""What ``compare.py`` measures: the systems, and the configurations of each, at declared depths.

A configuration's **declared claim depth** is the most jobs it lets its worker hold leased at
once, as its own knobs state it: jobledger's ``concurrency + prefetch``, PgQueuer's
``max_concurrent_tasks``, awa's ``max_workers``, procrastinate's and oban's ``concurrency``.
PgQueuer uncapped declares none. What each one actually reached is measured (``peers/probe``)
and printed beside it.

The default run measures every system at two depths: C (at most C jobs leased: jobledger with
prefetch off) and 11·C (jobledger's default depth for fast handlers: C slots and a prefetch of
up to 10·C), plus PgQueuer uncapped. ``--sweep`` adds each peer's documented throughput knobs
(PgQueuer's batch size 5-110, capped and uncapped; awa's claimers 1/2/4 and claim batch sizes),
and jobledger at every depth a peer configuration declares, so that each peer's best
configuration has a jobledger row at its depth to be compared with.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

REFERENCE = "jobledger"
# jobledger's pool claims up to PREFETCH_CAP_PER_WORKER (10) jobs per slot ahead of its slots.
DEEP_FACTOR = 11
# Connections a peer's pool gets at most, whatever the depth: the server is shared (other
# work, max_connections 100), and the peers wait for a pooled connection rather than fail.
POOL_CAP = 32
PGQUEUER_BATCHES = (5, 10, 25, 55, 110)
AWA_CLAIMERS = (1, 2, 4)
AWA_CLAIM_BATCHES: tuple[int | None, ...] = (None, 16, 64)  # None: awa's default (512)


@dataclass(frozen=True)
class System:
    name: str
    title: str
    script: str
    module: str = ""  # what must be importable in the project's environment ("" = nothing)
    oban_env: bool = False  # run from bench/.venv-oban instead of the project's environment


SYSTEMS: tuple[System, ...] = (
    System("jobledger", "jobledger", "jobledger_adapter.py", "ledger.runtime.pool"),
    System("pgqueuer", "PgQueuer", "pgqueuer_adapter.py", "pgqueuer"),
    System("procrastinate", "procrastinate", "procrastinate_adapter.py", "procrastinate"),
    System("awa-pg", "awa-pg", "awa_adapter.py", "awa"),
    System("oban-py", "oban-py", "oban_adapter.py", oban_env=True),
)
BY_NAME = {system.name: system for system in SYSTEMS}


@dataclass(frozen=True)
class Config:
    """One system with one set of knobs (``settings``, passed to its adapter as JSON)."""

    system: System
    settings: tuple[tuple[str, Any], ...]
    depth: int | None  # declared claim depth; None: the configuration sets no bound
    label: str

    @property
    def key(self) -> str:
        knobs = ",".join(f"{k}={v}" for k, v in self.settings)
        return f"{self.system.name}[{knobs}]"

    @property
    def options(self) -> dict[str, Any]:
        return dict(self.settings)


def _config(system: str, label: str, depth: int | None, **settings: Any) -> Config:
    return Config(BY_NAME[system], tuple(settings.items()), depth, label)


def _pool(depth: int) -> int:
    return min(depth + 2, POOL_CAP)


def jobledger(concurrency: int, depth: int) -> Config:
    prefetch = depth - concurrency
    return _config(
        "jobledger",
        f"jobledger C={concurrency} prefetch={prefetch}",
        depth,
        concurrency=concurrency,
        prefetch=prefetch,
    )


def pgqueuer(batch: int, cap: int | None) -> Config:
    bound = f"cap={cap}" if cap else "uncapped"
    return _config(
        "pgqueuer",
        f"PgQueuer batch={batch} {bound}",
        cap,
        batch_size=batch,
        max_concurrent_tasks=cap,
    )


def procrastinate(depth: int) -> Config:
    return _config(
        "procrastinate",
        f"procrastinate concurrency={depth}",
        depth,
        concurrency=depth,
        pool=_pool(depth),
    )


def awa(workers: int, claimers: int = 1, batch: int | None = None) -> Config:
    label = f"awa-pg workers={workers} claimers={claimers}"
    if batch:
        label += f" batch={batch}"
    return _config(
        "awa-pg",
        label,
        workers,
        max_workers=workers,
        claimers=claimers,
        claim_batch_size=batch,
        pool=_pool(workers),
    )


def oban(depth: int) -> Config:
    return _config(
        "oban-py", f"oban-py concurrency={depth}", depth, concurrency=depth, pool=_pool(depth)
    )


def default_depths(concurrency: int) -> tuple[int, ...]:
    return (concurrency, DEEP_FACTOR * concurrency)


def at_depth(concurrency: int, depth: int) -> list[Config]:
    """Every system at one declared depth (PgQueuer's batch: half of it, the most it allows)."""
    return [
        jobledger(concurrency, depth),
        pgqueuer(max(1, depth // 2), depth),
        procrastinate(depth),
        awa(depth),
        oban(depth),
    ]


def sweep(concurrency: int, depths: Sequence[int]) -> list[Config]:
    """The peers' documented throughput knobs, and jobledger at every depth they declare."""
    peers = []
    for batch in PGQUEUER_BATCHES:
        peers += [pgqueuer(batch, max(concurrency, 2 * batch)), pgqueuer(batch, None)]
    for workers in depths:
        for claimers in AWA_CLAIMERS:
            # A claim never takes more jobs than there are free workers: larger batches are
            # the default's behaviour again.
            peers += [awa(workers, claimers, b) for b in AWA_CLAIM_BATCHES if not b or b < workers]
    declared = sorted({c.depth for c in peers if c.depth} | set(depths))
    return [jobledger(concurrency, d) for d in declared if d >= concurrency] + peers


def plan_configs(
    concurrency: int, depths: Sequence[int], with_sweep: bool, systems: Iterable[str]
) -> list[Config]:
    """The configurations of one run, each once, grouped by system."""
    chosen = set(systems)
    configs = [c for d in depths for c in at_depth(concurrency, d)]
    configs.append(pgqueuer(max(1, max(depths) // 2), None))
    if with_sweep:
        configs += sweep(concurrency, depths)
    unique = {c.key: c for c in configs if c.system.name in chosen}
    order = {s.name: i for i, s in enumerate(SYSTEMS)}
    # Stable: within one system and depth, the order the knobs were listed in.
    return sorted(
        unique.values(), key=lambda c: (order[c.system.name], c.depth is None, c.depth or 0)
    )


def matching_reference(
    config: Config, reached: float | None, references: Sequence[Config]
) -> Config | None:
    """The jobledger configuration to hold against a peer's: the same declared depth; for a
    configuration that declares none, the deepest jobledger one not deeper than the depth the
    peer actually reached (so jobledger never gets more room than the peer used)."""
    if not references:
        return None
    if config.depth is not None:
        return next((r for r in references if r.depth == config.depth), None)
    by_depth = sorted(references, key=lambda r: r.depth or 0)
    fitting = [r for r in by_depth if reached is not None and (r.depth or 0) <= reached]
    return fitting[-1] if fitting else by_depth[0]
