"""A sync subject's URI and revision are bounded (``MAX_SUBJECT_BYTES`` of UTF-8) on every
way in: enqueue (API, CLI; HTTP in tests/http), a success's revision and content hash, a
source listing. 50 MB of each used to be accepted on SQLite (300 MB of database for one job)
and a random 2.7 kB URI broke PostgreSQL's index."""

from __future__ import annotations

import secrets

import pytest
from click.testing import CliRunner
from input_helpers import claimed, head

from jobledger_cli.main import cli
from ledger import Ledger
from ledger.core.errors import InvalidRequestError
from ledger.core.limits import MAX_NAME_LENGTH, MAX_SUBJECT_BYTES
from ledger.core.source_diff import diff_source
from ledger.core.values import Subject

WIDE = "\U0001d518"
"""A character of four UTF-8 bytes: names are counted in characters, the index in bytes."""


def _incompressible(size: int) -> str:
    """``size`` bytes of random hex: what PostgreSQL cannot compress into its index."""
    return secrets.token_hex(size // 2 + 1)[:size]


def test_the_longest_subject_is_stored_on_both_backends(ledger: Ledger) -> None:
    """A URI and revision of exactly the bound, random, under the longest source id of wide
    characters: enqueued, and its sync-state row written, on SQLite and PostgreSQL alike."""
    ledger.define("t")
    source_id = WIDE * MAX_NAME_LENGTH
    uri, revision = _incompressible(MAX_SUBJECT_BYTES), _incompressible(MAX_SUBJECT_BYTES)
    ledger.enqueue("t", subject=Subject(source_id=source_id, uri=uri, revision=revision))
    [job] = ledger.claim("w")
    assert job.lease is not None
    ledger.succeed(job.lease, revision=revision, content_hash=_incompressible(MAX_SUBJECT_BYTES))
    [row] = ledger.sources.sync_state(source_id)
    assert (row.uri, row.revision) == (uri, revision)


@pytest.mark.parametrize("field", ["uri", "revision"])
def test_a_subject_over_the_bound_is_refused_and_nothing_appended(
    ledger: Ledger, field: str
) -> None:
    """One byte over (a wide character over, too): request.invalid naming the field."""
    ledger.define("t")
    before = head(ledger)
    for too_long in ("a" * (MAX_SUBJECT_BYTES + 1), WIDE * (MAX_SUBJECT_BYTES // 4 + 1)):
        fields = {"uri": "u", "revision": None, field: too_long}
        with pytest.raises(InvalidRequestError, match=f"subject.{field} is .* the limit is"):
            ledger.enqueue("t", subject=Subject(source_id="s", **fields))  # type: ignore[arg-type]
    assert head(ledger) == before


def test_a_success_revision_over_the_bound_is_refused(ledger: Ledger) -> None:
    """What a handler reports on success goes into the sync-state row: bounded alike."""
    ledger.define("t")
    lease = claimed(ledger)
    before = head(ledger)
    for field in ("revision", "content_hash"):
        with pytest.raises(InvalidRequestError, match=f"{field} is .* the limit is"):
            ledger.succeed(lease, **{field: "r" * (MAX_SUBJECT_BYTES + 1)})  # type: ignore[arg-type]
    assert head(ledger) == before


def test_a_listing_over_the_bound_is_refused() -> None:
    """A poller's listing with an over-long URI or revision is refused as a whole."""
    long = "x" * (MAX_SUBJECT_BYTES + 1)
    for listing in ([(long, None)], [("u", long)]):
        with pytest.raises(InvalidRequestError, match="the limit is"):
            diff_source("s", listing, snapshot={}, known=set())


def test_the_cli_refuses_a_50_mb_uri_in_one_line(db_url: str) -> None:
    """``enqueue --uri`` of the issue's size: request.invalid, exit 1, nothing appended."""
    with Ledger.open(db_url) as ledger:
        ledger.define("t")
        before = head(ledger)
    big = "a" * (50 * 1024 * 1024)
    result = CliRunner().invoke(cli, ["--db", db_url, "enqueue", "t", "--source-id", "s",
                                      "--uri", big])  # fmt: skip
    assert result.exit_code == 1, result.exception
    assert result.stderr.startswith("error: request.invalid: subject.uri is 52428800 bytes")
    with Ledger.open(db_url) as ledger:
        assert head(ledger) == before
