"""The named-query loader: ``-- include:`` lines stand for an earlier query's body."""

from __future__ import annotations

from ledger.store.queries import load


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
