"""The named-query loader: ``-- include:`` lines stand for an earlier query's body, and a
query with variants (the claim) is composed once per subset of its flags."""

from __future__ import annotations

import pytest

from ledger.store.queries import compose, load


def test_the_frontier_is_spelled_once_and_included_alike_by_every_tailing_read() -> None:
    """The three queries that need the tailing readers' frontier hold the fragment's text
    itself, not the directive, and no query keeps an include line unexpanded."""
    queries = load("postgres")
    fragment = queries["fragment_events_frontier"]
    assert fragment.startswith("coalesce(") and "pg_snapshot_xip" in fragment
    flat = " ".join(fragment.split())
    for name in ("events_tail", "events_tail_head", "events_frontier"):
        assert flat in " ".join(queries[name].split()), name
    assert not [name for name, sql in queries.items() if "include:" in sql]
    assert not [name for name, sql in load("sqlite").items() if "include:" in sql]


CLAIM_FRAGMENTS = {
    "postgres": {
        "always": ["orgs", "left_out", "not_paused", "rate_token"],
        "types": ["type_filter"],
        "queues": ["queue_names", "queue_filter"],
        "no queues": [],
    },
    "sqlite": {
        "always": ["orgs", "left_out", "not_paused", "rate_token"],
        "types": ["type_filter"],
        "queues": ["walk_by_queue", "queue_filter"],
        "no queues": ["walk_by_org"],
    },
}
"""Per backend, the fragment_claim_* fragments in every claim variant, in those with a type
filter, in those with a queue filter and in those without one."""


@pytest.mark.parametrize("backend", ["postgres", "sqlite"])
def test_each_claim_variant_holds_exactly_the_fragments_its_filters_choose(backend: str) -> None:
    """queue_claim, queue_claim_types, queue_claim_queues and queue_claim_types_queues are
    composed from one statement: each holds every fragment its filters choose, none other,
    and every fragment_claim_* fragment is in some variant. (Counted, not just found: the
    SQLite walk's index hint is also spelled inside the orgs fragment.)"""
    queries = load(backend)
    flat = {name: " ".join(sql.split()) for name, sql in queries.items()}
    chosen = {f"fragment_claim_{n}" for part in CLAIM_FRAGMENTS[backend].values() for n in part}
    assert chosen == {name for name in queries if name.startswith("fragment_claim_")}
    for types in (False, True):
        for queues in (False, True):
            name = "queue_claim" + "_types" * types + "_queues" * queues
            parts = ["always", "types" if types else "", "queues" if queues else "no queues"]
            wanted = {
                f"fragment_claim_{n}" for p in parts for n in CLAIM_FRAGMENTS[backend].get(p, [])
            }
            for fragment in chosen:
                inside_others = sum(
                    flat[other].count(flat[fragment]) for other in wanted - {fragment}
                )
                expected = inside_others + (fragment in wanted)
                assert flat[name].count(flat[fragment]) == expected, (name, fragment)


def test_a_query_with_variants_is_composed_once_per_subset_of_its_flags() -> None:
    """``-- variants: a, b`` yields the query, ``_a``, ``_b`` and ``_a_b``, in that order;
    ``-- include if`` / ``unless`` lines hold their fragment (indented as the line) in
    exactly the variants with / without the flag; plain includes are in every variant."""
    text = """
-- name: fragment_x
-- what x does
x = 1
-- name: fragment_y
y = 2
  AND z = 3
-- name: fragment_w
w
-- name: thing_get
-- variants: a, b
-- what thing_get returns
SELECT 1
    -- include if a: fragment_x
    -- include unless b: fragment_w
    -- include if b: fragment_y
    -- include: fragment_x
"""
    queries = compose([("test.sql", text)])
    assert list(queries) == [
        "fragment_x",
        "fragment_y",
        "fragment_w",
        "thing_get",
        "thing_get_a",
        "thing_get_b",
        "thing_get_a_b",
    ]
    assert queries["thing_get"].splitlines() == ["SELECT 1", "    w", "    x = 1"]
    assert queries["thing_get_a"].splitlines() == ["SELECT 1", "    x = 1", "    w", "    x = 1"]
    assert queries["thing_get_b"].splitlines() == [
        "SELECT 1",
        "    y = 2",
        "      AND z = 3",
        "    x = 1",
    ]
    assert queries["thing_get_a_b"].splitlines() == [
        "SELECT 1",
        "    x = 1",
        "    y = 2",
        "      AND z = 3",
        "    x = 1",
    ]


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("-- name: q\n-- include: fragment_later\n-- name: fragment_later\nx", "before defining"),
        ("-- name: f\nx\n-- name: q\n-- include if a: f", "not a variant"),
        (
            "-- name: f\nx\n-- name: g\n-- variants: a\n-- include if a: f\n"
            "-- name: q\n-- include: g",
            "has variants",
        ),
        ("-- name: q\n-- variants: a\nx\n-- name: q_a\ny", "defined twice"),
        ("-- name: q\nx\n-- name: q\ny", "defined twice"),
    ],
)
def test_a_composition_that_cannot_be_made_is_refused(text: str, error: str) -> None:
    """An include before its fragment, a choice on a flag the query does not declare, an
    include of a query with variants and a name (or variant name) given twice are each a
    ValueError naming the fault."""
    with pytest.raises(ValueError, match=error):
        compose([("test.sql", text)])
