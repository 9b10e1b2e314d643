"""Source diff: what a source's listing means for its sync state (haiku's pollers).

A poller lists a source as ``[(uri, revision | None)]`` and compares the listing with the
source's sync state: its revision snapshot (``{uri: revision}`` for rows that have one) and its
known URIs (every row). :func:`diff_source` makes the decision per URI:

- **upsert** when the URI is not known (new), or ``snapshot.get(uri) != revision``: the
  listing's revision differs from the stored one, including a listing that gives *no*
  revision for a URI whose stored row has one, and a listing that gives one for a URI whose
  stored row has none;
- **unchanged** when the URI is known and ``snapshot.get(uri) == revision``. When the listing
  has no revision this means: a known URI is unchanged only if its stored row has no revision
  either (``None == None``); a stored revision the listing no longer confirms is a change;
- **delete** for every known URI the listing does not name.

Why this rule: it is exactly the comparison the two reads of the sync state are shaped for.
The snapshot answers "did the revision change?" by equality (``None`` standing for "no
revision"), and the known URIs answer what the snapshot cannot: whether a URI without a
stored revision was ever ingested (new → upsert) and which URIs vanished (→ delete). A
source that never reports revisions is therefore ingested once per appearance (after a
delete, it is new again); for edits to be picked up the listing must carry a revision (an
ETag, a modification time). The stored revision is the *result's* (what the handler
reported on success), so a handler must report the same kind of revision the listing carries,
or every poll sees a change.

The listing must be complete: an empty listing deletes every known URI, exactly as a source
that lost all its documents should. A poller whose listing failed must not call this.

Pure: no store, driver or clock.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Iterable, Mapping
from enum import StrEnum
from uuid import UUID

import msgspec

from ledger.core.errors import InvalidRequestError
from ledger.core.limits import check_subject_text
from ledger.core.values import Subject, SubjectOp

Listing = Iterable[tuple[str, str | None]]
"""A source listing: ``(uri, revision)`` pairs, ``None`` where the source gives no revision."""


class SourceAction(StrEnum):
    """What a listing means for one URI."""

    UPSERT = "upsert"
    UNCHANGED = "unchanged"
    DELETE = "delete"


class SourceDecision(msgspec.Struct, frozen=True):
    """The decision for one URI, with the evidence it was made on.

    ``revision`` is the listing's (``None`` for a delete: the URI is not listed);
    ``stored_revision`` is the snapshot's; ``known`` is whether the sync state has a row.
    """

    uri: str
    action: SourceAction
    revision: str | None
    stored_revision: str | None
    known: bool

    @property
    def is_new(self) -> bool:
        """An upsert of a URI the sync state has never seen."""
        return self.action is SourceAction.UPSERT and not self.known

    def subject(self, source_id: str) -> Subject:
        """The sync subject a job carrying out this decision has (upserts carry the listing's
        revision). An unchanged URI needs no job and has no subject."""
        if self.action is SourceAction.UNCHANGED:
            raise InvalidRequestError(f"{self.uri!r} is unchanged; it needs no job")
        op = SubjectOp.UPSERT if self.action is SourceAction.UPSERT else SubjectOp.DELETE
        return Subject(source_id=source_id, uri=self.uri, op=op, revision=self.revision)


class SourceDiff(msgspec.Struct, frozen=True):
    """Every decision for one listing: upserts and unchanged URIs in listing order, deletes
    sorted by URI."""

    source_id: str
    upserts: list[SourceDecision]
    unchanged: list[SourceDecision]
    deletes: list[SourceDecision]

    @property
    def changes(self) -> list[SourceDecision]:
        """The decisions that need a job: upserts, then deletes."""
        return [*self.upserts, *self.deletes]

    def subjects(self) -> list[Subject]:
        """The sync subjects of :attr:`changes`, in the same order."""
        return [decision.subject(self.source_id) for decision in self.changes]


class SyncJob(msgspec.Struct, frozen=True):
    """A decision that was enqueued, and its job."""

    decision: SourceDecision
    job_id: UUID


class SourceSync(msgspec.Struct, frozen=True):
    """What :meth:`ledger.Ledger.sources.sync` did: the diff, the jobs it enqueued, and the
    changes it skipped because their subject already had a live job (pending or leased)."""

    diff: SourceDiff
    enqueued: list[SyncJob]
    skipped: list[SourceDecision]


def _checked(source_id: str, listing: Listing) -> list[tuple[str, str | None]]:
    if not isinstance(source_id, str) or not source_id:
        raise InvalidRequestError("source_id must be a non-empty string")
    entries = list(listing)
    for uri, revision in entries:
        if not isinstance(uri, str) or not uri:
            raise InvalidRequestError(f"listing URIs must be non-empty strings, not {uri!r}")
        if revision is not None and not isinstance(revision, str):
            raise InvalidRequestError(f"revision of {uri!r} must be a string or None")
        check_subject_text(uri, "a listing URI")
        if revision is not None:
            check_subject_text(revision, "a listing revision")
    repeated = sorted(uri for uri, count in Counter(uri for uri, _ in entries).items() if count > 1)
    if repeated:
        # Two entries for one URI leave no single answer (which revision is current?).
        raise InvalidRequestError(
            f"source {source_id!r} listing names {len(repeated)} URI(s) more than once: "
            + ", ".join(repr(uri) for uri in repeated[:5])
            + (", …" if len(repeated) > 5 else "")
        )
    return entries


def diff_source(
    source_id: str,
    listing: Listing,
    *,
    snapshot: Mapping[str, str],
    known: Collection[str],
) -> SourceDiff:
    """Decide upsert / unchanged / delete for every URI of ``listing`` and of ``known`` (see
    the module docstring for the rule).

    ``snapshot`` and ``known`` are the source's ``ledger.sources.revision_snapshot`` and
    ``ledger.sources.known_uris``; a snapshot URI missing from ``known`` counts as known.
    A URI listed twice is refused with :class:`~ledger.core.errors.InvalidRequestError`.
    """
    entries = _checked(source_id, listing)
    known_uris = set(known) | set(snapshot)
    upserts: list[SourceDecision] = []
    unchanged: list[SourceDecision] = []
    for uri, revision in entries:
        stored = snapshot.get(uri)
        is_known = uri in known_uris
        if is_known and stored == revision:
            unchanged.append(SourceDecision(uri, SourceAction.UNCHANGED, revision, stored, True))
        else:
            upserts.append(SourceDecision(uri, SourceAction.UPSERT, revision, stored, is_known))
    listed = {uri for uri, _ in entries}
    deletes = [
        SourceDecision(uri, SourceAction.DELETE, None, snapshot.get(uri), True)
        for uri in sorted(known_uris - listed)
    ]
    return SourceDiff(source_id, upserts, unchanged, deletes)
