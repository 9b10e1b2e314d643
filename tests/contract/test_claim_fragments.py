"""The claim statement composed from named fragments, on both backends: each fragment plans
on its own, each composed variant walks the indexes the hand-written copy it replaced walked
(issue 29, item 3), and claims what it claimed, in the same order."""

from __future__ import annotations

import json
import re
import sqlite3
from collections.abc import Iterator
from contextlib import closing, contextmanager
from typing import Any

import psycopg
import pytest

from ledger import FakeClock, Ledger
from ledger.core.rates import parse_rate
from ledger.core.times import to_us
from ledger.store.queries import load

HARNESS: dict[str, dict[str, str]] = {
    "postgres": {
        "fragment_claim_orgs": "WITH RECURSIVE {fragment_claim_orgs} SELECT org FROM orgs",
        "fragment_claim_queue_names": (
            "SELECT wanted.name, job_id FROM {fragment_claim_queue_names} jl_queue"
            " WHERE status = 'pending' AND coalesce(queue, 'default') = wanted.name"
        ),
        "fragment_claim_queue_filter": (
            "SELECT job_id FROM unnest(%(queues)s::text[]) AS wanted (name), jl_queue"
            " WHERE status = 'pending' {fragment_claim_queue_filter}"
        ),
        "fragment_claim_type_filter": (
            "SELECT job_id FROM jl_queue WHERE status = 'pending' {fragment_claim_type_filter}"
        ),
        "fragment_claim_left_out": (
            "SELECT job_id FROM jl_queue WHERE status = 'pending' {fragment_claim_left_out}"
        ),
        "fragment_claim_not_paused": (
            "SELECT job_id FROM jl_queue WHERE status = 'pending' {fragment_claim_not_paused}"
        ),
        "fragment_claim_rate_token": (
            "SELECT job_id FROM jl_queue WHERE status = 'pending' {fragment_claim_rate_token}"
        ),
    },
    "sqlite": {
        "fragment_claim_orgs": "WITH RECURSIVE {fragment_claim_orgs} SELECT org FROM orgs",
        "fragment_claim_walk_by_org": (
            "SELECT job_id FROM jl_queue {fragment_claim_walk_by_org}"
            " WHERE status = 'pending' AND coalesce(org, '') = ''"
            " ORDER BY priority DESC, run_at, enqueue_seq"
        ),
        "fragment_claim_walk_by_queue": (
            "SELECT job_id FROM jl_queue {fragment_claim_walk_by_queue}"
            " WHERE status = 'pending' AND coalesce(queue, 'default') = 'a'"
            " ORDER BY priority DESC, run_at, enqueue_seq"
        ),
        "fragment_claim_queue_filter": (
            "SELECT job_id FROM jl_queue WHERE status = 'pending' {fragment_claim_queue_filter}"
        ),
        "fragment_claim_type_filter": (
            "SELECT job_id FROM jl_queue WHERE status = 'pending' {fragment_claim_type_filter}"
        ),
        "fragment_claim_left_out": (
            "SELECT job_id FROM jl_queue WHERE status = 'pending' {fragment_claim_left_out}"
        ),
        "fragment_claim_not_paused": (
            "SELECT job_id FROM jl_queue WHERE status = 'pending' {fragment_claim_not_paused}"
        ),
        "fragment_claim_rate_token": (
            "SELECT job_id FROM jl_queue WHERE status = 'pending' {fragment_claim_rate_token}"
        ),
    },
}
"""Per backend, each claim fragment inside the smallest statement that runs it."""

FRAGMENT_INDEXES = {
    "postgres": {"fragment_claim_orgs": {"jl_queue_claim_org_idx"}},
    "sqlite": {
        "fragment_claim_orgs": {"jl_queue_claim_org_idx"},
        "fragment_claim_walk_by_org": {"jl_queue_claim_org_idx"},
        "fragment_claim_walk_by_queue": {"jl_queue_claim_queue_idx"},
    },
}
"""The fragments that choose an index, and the jl_queue index each walks."""

VARIANT_INDEXES = {
    "postgres": {
        "queue_claim": {"jl_queue_claim_org_idx"},
        "queue_claim_types": {"jl_queue_claim_org_idx"},
        "queue_claim_queues": {"jl_queue_claim_org_idx"},
        "queue_claim_types_queues": {"jl_queue_claim_org_idx"},
    },
    "sqlite": {
        "queue_claim": {"jl_queue_claim_org_idx"},
        "queue_claim_types": {"jl_queue_claim_org_idx"},
        "queue_claim_queues": {"jl_queue_claim_org_idx", "jl_queue_claim_queue_idx"},
        "queue_claim_types_queues": {"jl_queue_claim_org_idx", "jl_queue_claim_queue_idx"},
    },
}
"""The jl_queue indexes each claim variant walks over _fill's jobs: those the hand-written
copies walked before they were composed (this test, run against them). Every variant's loose
scan of the orgs walks jl_queue_claim_org_idx. SQLite's walks name their index; PostgreSQL's
planner chooses, and here walks each queue's jobs of an org by jl_queue_claim_org_idx too
(the org an equality, the queue a filter), as the copies did. Checked at the change over
20,000 pending jobs of four queues and five orgs as well: the same plans and costs before and
after on PostgreSQL, the same query plans on SQLite, the texts token for token the same."""

PARAMS: dict[str, Any] = {
    "now": to_us(FakeClock().now()),
    "limit": 10,
    "types": ["t"],
    "queues": ["a", "default"],
    "full_types": [],
    "full_orgs": [],
    "taken": [],
}


@pytest.fixture(params=["sqlite", "postgres"])
def backend(request: pytest.FixtureRequest) -> str:
    """Each backend in turn."""
    return str(request.param)


@pytest.fixture
def url(backend: str, request: pytest.FixtureRequest) -> str:
    """An initialised ledger database of ``backend``."""
    return str(request.getfixturevalue("pg_url" if backend == "postgres" else "sqlite_url"))


@pytest.fixture
def labels(url: str, clock: FakeClock) -> dict[str, str]:
    """``url``'s database filled by :func:`_fill` (its statistics gathered); the jobs'
    labels by id."""
    with Ledger.open(url, clock=clock) as ledger:
        found = _fill(ledger, clock)
    if url.startswith("sqlite"):
        with closing(sqlite3.connect(url.removeprefix("sqlite:///"))) as lite:
            lite.execute("ANALYZE")
            lite.commit()
    else:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("ANALYZE jl_queue, jl_queue_states, jl_rate_buckets, jl_definitions")
    return found


@contextmanager
def explainer(url: str) -> Iterator[Any]:
    """A function from a statement to its plan's lines, on ``url``'s database. PostgreSQL:
    sequential and bitmap scans off (the tables are tiny: which index would it walk?) and
    each partition's index named by its parent's name."""
    if url.startswith("sqlite"):
        with closing(sqlite3.connect(url.removeprefix("sqlite:///"))) as lite:
            params = {k: json.dumps(v) if isinstance(v, list) else v for k, v in PARAMS.items()}

            def plan_of_sqlite(sql: str) -> list[str]:
                return [str(row[-1]) for row in lite.execute("EXPLAIN QUERY PLAN " + sql, params)]

            yield plan_of_sqlite
        return
    with psycopg.connect(url) as conn:
        conn.execute("SET enable_seqscan = off")
        conn.execute("SET enable_bitmapscan = off")

        def plan_of_postgres(sql: str) -> list[str]:
            lines = [str(row[0]) for row in conn.execute(("EXPLAIN " + sql).encode(), PARAMS)]
            return [_root_index_names(conn, line) for line in lines]

        yield plan_of_postgres


def _root_index_names(conn: psycopg.Connection[Any], line: str) -> str:
    """The plan line with each partition's index renamed to the partitioned index it is
    part of (jl_queue is partitioned by month)."""

    def root(match: re.Match[str]) -> str:
        row = conn.execute(
            "SELECT coalesce(pg_partition_root(%s::regclass), %s::regclass)::text",
            (match.group(1), match.group(1)),
        ).fetchone()
        assert row is not None
        return f"using {row[0]}"

    return re.sub(r"using (\w+)", root, line)


def indexes_in(plan: list[str]) -> set[str]:
    """The jl_queue indexes a plan walks (both backends' spellings)."""
    return {
        name
        for line in plan
        for name in re.findall(
            r"(?:using|USING INDEX|USING COVERING INDEX) (jl_queue_(?!states)\w+)", line
        )
    }


def test_every_claim_fragment_plans_alone_and_walks_its_index(
    url: str, backend: str, labels: dict[str, str]
) -> None:
    """Each fragment_claim_* fragment, in the smallest statement that runs it, is planned by
    the database; the fragments that choose an index walk it."""
    queries = load(backend)
    fragments = {name for name in queries if name.startswith("fragment_claim_")}
    assert fragments == set(HARNESS[backend])
    with explainer(url) as plan_of:
        for name in sorted(fragments):
            plan = plan_of(HARNESS[backend][name].format(**queries))
            assert plan, name
            expected = FRAGMENT_INDEXES[backend].get(name)
            if expected is not None:
                assert indexes_in(plan) == expected, (name, plan)


def test_each_claim_variant_walks_the_indexes_its_copy_walked(
    url: str, backend: str, labels: dict[str, str]
) -> None:
    """Each composed claim variant's plan walks the jl_queue indexes the hand-written copy
    it replaced walked: jl_queue_claim_org_idx without a queue filter, and
    jl_queue_claim_queue_idx for each queue's walk with one."""
    queries = load(backend)
    with explainer(url) as plan_of:
        for name, expected in VARIANT_INDEXES[backend].items():
            plan = plan_of(queries[name])
            assert indexes_in(plan) == expected, (name, plan)


def _fill(ledger: Ledger, clock: FakeClock) -> dict[str, str]:
    """A set covering every fragment: two types and a rate-limited one whose token is spent,
    named queues, the default queue and a paused one, jobs of two orgs and of none, a job not
    yet due. Labels by job id: type, queue (- for none), org (- for none), priority."""
    ledger.define("t")
    ledger.define("u")
    ledger.define("rated", rate=parse_rate("1/1h"))
    spent = ledger.enqueue("rated", queue="a", org="o1").job_id
    [claimed] = ledger.claim("spender", limit=1, types=["rated"])
    assert claimed.job_id == spent
    jobs = [
        ("t", "a", "o1", 100),
        ("t", "a", "o2", 100),
        ("u", "a", "o1", 200),
        ("t", "b", None, 100),
        ("u", "b", "o2", 50),
        ("t", None, "o1", 100),
        ("u", "default", None, 300),
        ("t", "held", "o1", 500),
        ("u", "held", "o2", 500),
        ("rated", "a", "o1", 400),
        ("rated", "b", None, 400),
        ("t", "a", "o2", 100),
        ("u", None, None, 100),
    ]
    labels = {}
    for job_type, queue, org, priority in jobs:
        job = ledger.enqueue(job_type, queue=queue, org=org, priority=priority)
        labels[str(job.job_id)] = f"{job_type}:{queue or '-'}:{org or '-'}:{priority}"
    later = ledger.enqueue("t", queue="a", org="o1", priority=900, delay_s=3600)
    labels[str(later.job_id)] = "t:a:o1:900:later"
    ledger.limits.pause_queue("held")
    clock.advance(1)
    return labels


CLAIMS: list[tuple[dict[str, Any], list[str]]] = [
    (
        {"types": None, "queues": None},
        [
            "u:default:-:300",
            "u:a:o1:200",
            "t:a:o2:100",
            "t:a:o1:100",
            "t:b:-:100",
            "t:a:o2:100",
            "t:-:o1:100",
            "u:-:-:100",
            "u:b:o2:50",
        ],
    ),
    (
        {"types": ["t", "rated"], "queues": None},
        ["t:a:o1:100", "t:a:o2:100", "t:b:-:100", "t:-:o1:100", "t:a:o2:100"],
    ),
    (
        {"types": None, "queues": ["a", "default", "held"]},
        [
            "u:default:-:300",
            "u:a:o1:200",
            "t:a:o2:100",
            "t:a:o1:100",
            "t:a:o2:100",
            "u:-:-:100",
            "t:-:o1:100",
        ],
    ),
    (
        {"types": ["u", "rated"], "queues": ["b", "held", "default"]},
        ["u:default:-:300", "u:b:o2:50", "u:-:-:100"],
    ),
    (
        {
            "types": None,
            "queues": None,
            "full_types": ["u"],
            "full_orgs": [("t", "o2")],
            "limit": 3,
        },
        ["t:a:o1:100", "t:b:-:100", "t:-:o1:100"],
    ),
]
"""Claims of each variant over _fill's jobs (and one with the limits' left-out lists), and
the jobs each claims in order: the claims the hand-written copies made (run on both backends
against them before they were composed)."""


def test_each_claim_variant_claims_what_its_copy_claimed(
    url: str, clock: FakeClock, labels: dict[str, str]
) -> None:
    """Over a set covering types, queues, org fairness, a paused queue and a spent rate, each
    variant (chosen by the unit of work from the filters) returns the same jobs in the same
    order as the copy it replaced: round-robin across orgs ('' first), claim order within
    one, no paused, rate-limited, refused or future job."""
    with Ledger.open(url, clock=clock) as ledger:
        for ask, expected in CLAIMS:
            options = dict(ask)
            types, queues = options.pop("types"), options.pop("queues")
            limit = options.pop("limit", 20)
            with ledger.store.unit_of_work() as uow:
                found = uow.claimable(clock.now(), types, limit, queues, **options)
            assert [labels[str(state.job_id)] for state in found] == expected, ask
