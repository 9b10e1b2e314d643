"""The source diff: upsert / unchanged / delete decisions for a listing, no database."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ledger import InvalidRequestError, Subject, SubjectOp
from ledger.core.source_diff import SourceAction, SourceDecision, diff_source

UPSERT, UNCHANGED, DELETE = SourceAction.UPSERT, SourceAction.UNCHANGED, SourceAction.DELETE


def decide(
    listing: list[tuple[str, str | None]],
    snapshot: dict[str, str] | None = None,
    known: set[str] | None = None,
) -> dict[str, SourceDecision]:
    """The diff of ``listing`` as ``{uri: decision}`` (known defaults to the snapshot's URIs)."""
    snapshot = snapshot or {}
    diff = diff_source("src", listing, snapshot=snapshot, known=known or set(snapshot))
    decisions = [*diff.upserts, *diff.unchanged, *diff.deletes]
    assert len({d.uri for d in decisions}) == len(decisions)
    return {d.uri: d for d in decisions}


def test_a_new_uri_is_an_upsert_of_the_listed_revision() -> None:
    """A URI the sync state does not know is upserted, with the listing's revision."""
    [decision] = decide([("a", "e1")]).values()
    assert decision == SourceDecision("a", UPSERT, "e1", None, known=False)
    assert decision.is_new


def test_a_changed_revision_is_an_upsert_of_a_known_uri() -> None:
    """A known URI listed with another revision than the stored one is upserted."""
    decision = decide([("a", "e2")], {"a": "e1"})["a"]
    assert decision == SourceDecision("a", UPSERT, "e2", "e1", known=True)
    assert not decision.is_new


def test_the_same_revision_is_unchanged() -> None:
    """A known URI listed with its stored revision needs no job."""
    assert decide([("a", "e1")], {"a": "e1"})["a"].action is UNCHANGED


def test_a_known_uri_missing_from_the_listing_is_deleted() -> None:
    """Known URIs the listing leaves out are deleted, with or without a stored revision."""
    decisions = decide([("a", "e1")], {"a": "e1", "b": "e2"}, known={"a", "b", "c"})
    assert decisions["b"] == SourceDecision("b", DELETE, None, "e2", known=True)
    assert decisions["c"] == SourceDecision("c", DELETE, None, None, known=True)
    assert decisions["a"].action is UNCHANGED


def test_no_listed_revision_for_an_unknown_uri_is_an_upsert() -> None:
    """A new URI without a revision is still new: upserted."""
    assert decide([("a", None)])["a"] == SourceDecision("a", UPSERT, None, None, known=False)


def test_no_listed_revision_for_a_uri_stored_with_one_is_an_upsert() -> None:
    """A stored revision the listing no longer confirms counts as a change."""
    assert decide([("a", None)], {"a": "e1"})["a"] == SourceDecision("a", UPSERT, None, "e1", True)


def test_no_listed_revision_for_a_uri_stored_without_one_is_unchanged() -> None:
    """Known, and neither side has a revision: unchanged (None equals None)."""
    decision = decide([("a", None)], known={"a"})["a"]
    assert decision == SourceDecision("a", UNCHANGED, None, None, known=True)


def test_a_listed_revision_for_a_uri_stored_without_one_is_an_upsert() -> None:
    """A revision appearing for a URI stored without one is a change."""
    assert decide([("a", "e1")], known={"a"})["a"] == SourceDecision("a", UPSERT, "e1", None, True)


def test_an_empty_listing_deletes_every_known_uri() -> None:
    """An empty listing means the source has no documents left."""
    diff = diff_source("src", [], snapshot={"b": "e1"}, known={"a", "b"})
    assert (diff.upserts, diff.unchanged) == ([], [])
    assert [(d.uri, d.action) for d in diff.deletes] == [("a", DELETE), ("b", DELETE)]


def test_an_empty_listing_of_an_empty_source_decides_nothing() -> None:
    """Nothing listed and nothing known: no decisions, no subjects."""
    diff = diff_source("src", [], snapshot={}, known=set())
    assert diff.changes == [] and diff.unchanged == [] and diff.subjects() == []


def test_a_snapshot_uri_missing_from_known_counts_as_known() -> None:
    """The snapshot's URIs are known even if the caller's known set leaves them out."""
    assert decide([], {"a": "e1"}, known={"z"})["a"].action is DELETE
    assert decide([("a", "e1")], {"a": "e1"}, known={"z"})["a"].action is UNCHANGED


def test_a_uri_listed_twice_is_refused_naming_it() -> None:
    """Duplicate URIs leave no single answer: a clear request.invalid error."""
    with pytest.raises(InvalidRequestError, match=r"more than once: 'a'") as raised:
        diff_source("src", [("a", "e1"), ("b", None), ("a", "e1")], snapshot={}, known=set())
    assert raised.value.code == "request.invalid"


@pytest.mark.parametrize(
    ("source_id", "listing"),
    [("", [("a", None)]), ("src", [("", None)]), ("src", [("a", 7)])],
    ids=["empty source", "empty uri", "non-string revision"],
)
def test_malformed_input_is_refused(source_id: str, listing: list[tuple[str, str | None]]) -> None:
    """An empty source id or URI, or a revision that is not a string, is request.invalid."""
    with pytest.raises(InvalidRequestError):
        diff_source(source_id, listing, snapshot={}, known=set())


def test_subjects_carry_the_listed_revision_upserts_first_then_sorted_deletes() -> None:
    """Upserts keep listing order with the listing's revision; deletes follow, sorted."""
    diff = diff_source(
        "src",
        [("n2", "r2"), ("same", "e"), ("n1", None)],
        snapshot={"same": "e", "z": "e"},
        known={"same", "z", "y"},
    )
    assert diff.subjects() == [
        Subject(source_id="src", uri="n2", op=SubjectOp.UPSERT, revision="r2"),
        Subject(source_id="src", uri="n1", op=SubjectOp.UPSERT, revision=None),
        Subject(source_id="src", uri="y", op=SubjectOp.DELETE),
        Subject(source_id="src", uri="z", op=SubjectOp.DELETE),
    ]
    with pytest.raises(InvalidRequestError):
        diff.unchanged[0].subject("src")


revisions = st.none() | st.sampled_from(["e1", "e2"])
uris = st.sampled_from([f"u{i}" for i in range(6)])


@given(
    listing=st.dictionaries(uris, revisions),
    stored=st.dictionaries(uris, revisions),
)
def test_every_uri_gets_exactly_the_decision_the_rule_says(
    listing: dict[str, str | None], stored: dict[str, str | None]
) -> None:
    """Listed: upsert unless known with an equal stored revision; known and unlisted: delete."""
    snapshot = {uri: rev for uri, rev in stored.items() if rev is not None}
    decisions = decide(list(listing.items()), snapshot, known=set(stored))
    assert set(decisions) == set(listing) | set(stored)
    for uri, decision in decisions.items():
        if uri not in listing:
            expected = DELETE
        elif uri in stored and stored[uri] == listing[uri]:
            expected = UNCHANGED
        else:
            expected = UPSERT
        assert decision.action is expected, (uri, listing, stored)
