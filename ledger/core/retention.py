"""Retention: which finished jobs leave the hot tables for the archive, and the events that
say so.

The policy is a stream of its own (:data:`RETENTION_STREAM_ID`, derived from a name, so every
database names it alike) of :class:`RetentionPolicySet` events, folded by
:func:`evolve_policy`; each batch a retention run moves is one :class:`JobsArchived` in the same
stream, appended in the transaction that removes the batch's rows from the hot tables
(docs/architecture.md, decision 31). Pure: no store, no clock.
"""

from __future__ import annotations

import re
from datetime import datetime
from uuid import UUID

import msgspec

from ledger.core.errors import InvalidRequestError
from ledger.core.events import Event
from ledger.core.limits import MAX_DURATION_S
from ledger.core.times import to_us

RETENTION_NAMESPACE = UUID("0b9d6a2e-51c4-4f7e-9a3d-3f1e8c5b7a90")
RETENTION_STREAM_ID = UUID("395a7cb9-5c53-56ec-a580-ae1ce1865211")
"""The originator id of the retention stream (stable across databases):
``uuid5(RETENTION_NAMESPACE, "retention")``, written out, since computing it at import loaded
hashlib's OpenSSL (~4 ms) into every process that decodes events, a CLI read too
(tests/retention/test_retention_policy.py checks the two agree)."""

FINISHED_STATUSES = ("succeeded", "dead", "cancelled")
"""The statuses a job may be archived in: it will never change again unless an operator
requeues it (a requeue re-checked under the writer lock keeps it hot)."""


class RetentionPolicySet(Event, frozen=True):
    """A retention rule is set or dropped (``after_s`` ``None``): policy -> policy.

    A rule applies to jobs of ``job_type`` (``None``: any type) whose status is ``status``
    (``None``: any finished status) and that have not changed for ``after_s`` seconds. The
    most specific rule matching a job wins (:meth:`RetentionPolicy.rule_for`)."""

    name = "retention_policy_set"
    job_type: str | None
    status: str | None
    after_s: int | None
    actor: str | None


class JobsArchived(Event, frozen=True, omit_defaults=True):
    """One batch of finished jobs moved from the hot tables to the archive (their events and
    view rows both; nothing is deleted). ``archive`` says where (the SQLite archive file's
    name); ``moved`` counts the rows moved per table; ``policy_version`` is the retention
    stream version whose policy chose them. ``partition`` names the PostgreSQL events
    partition the batch detached (left out of the stored map when unset: a SQLite batch's
    bytes are as before)."""

    name = "jobs_archived"
    job_ids: list[UUID]
    archive: str
    moved: dict[str, int]
    policy_version: int
    actor: str | None
    partition: str | None = None


RETENTION_EVENTS: tuple[type[Event], ...] = (RetentionPolicySet, JobsArchived)


class RetentionRule(msgspec.Struct, frozen=True):
    """One rule of the policy: jobs of a type and/or status leave after ``after_s``."""

    job_type: str | None
    status: str | None
    after_s: int


class RetentionPolicy(msgspec.Struct, frozen=True):
    """The fold of the retention stream: its rules and the stream's version."""

    rules: tuple[RetentionRule, ...] = ()
    version: int = 0

    def rule_for(self, job_type: str, status: str) -> RetentionRule | None:
        """The most specific rule for a job: type and status, then type, then status, then
        the default (neither); ``None``: no rule, the job stays."""
        by_key = {(r.job_type, r.status): r for r in self.rules}
        for key in ((job_type, status), (job_type, None), (None, status), (None, None)):
            if key in by_key:
                return by_key[key]
        return None

    @property
    def shortest_after_s(self) -> int | None:
        """The shortest ``after`` of any rule: nothing younger than it can be archived."""
        return min((r.after_s for r in self.rules), default=None)


def evolve_policy(policy: RetentionPolicy, event: Event) -> RetentionPolicy:
    """The policy after one retention event (a :class:`JobsArchived` changes no rule)."""
    rules = policy.rules
    if isinstance(event, RetentionPolicySet):
        kept = [r for r in rules if (r.job_type, r.status) != (event.job_type, event.status)]
        if event.after_s is not None:
            kept.append(RetentionRule(event.job_type, event.status, event.after_s))
        rules = tuple(sorted(kept, key=lambda r: (r.job_type or "", r.status or "")))
    return RetentionPolicy(rules, policy.version + 1)


def fold_policy(events: list[Event]) -> RetentionPolicy:
    """The policy the retention stream's events make."""
    policy = RetentionPolicy()
    for event in events:
        policy = evolve_policy(policy, event)
    return policy


def check_status(status: str | None) -> str | None:
    """``status`` if it is a finished status (or ``None``), else ``request.invalid``."""
    if status is not None and status not in FINISHED_STATUSES:
        raise InvalidRequestError(
            f"retention applies to finished jobs: status must be one of "
            f"{', '.join(FINISHED_STATUSES)}, not {status!r}"
        )
    return status


_DURATION = re.compile(r"^\s*(\d+)\s*([smhdw])\s*$")
_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86_400, "w": 604_800}


def parse_after(text: str) -> int:
    """``30d``, ``12h``, ``90m``, ``2w``, ``45s`` as seconds (a positive whole number of one
    unit, at most :data:`~ledger.core.limits.MAX_DURATION_S`); anything else is
    ``request.invalid``."""
    matched = _DURATION.match(text)
    if matched is None or int(matched.group(1)) <= 0:
        raise InvalidRequestError(
            f"--after must be a positive number and a unit of s, m, h, d or w (30d), not {text!r}"
        )
    return check_after(int(matched.group(1)) * _UNIT_S[matched.group(2)])


def check_after(after_s: object) -> int:
    """A rule's age: a whole number of seconds from 1 to
    :data:`~ledger.core.limits.MAX_DURATION_S` (a century), so that ``now - age`` stays a
    time the events and the queries can hold; else ``request.invalid``."""
    if type(after_s) is not int or not 1 <= after_s <= MAX_DURATION_S:
        raise InvalidRequestError(
            f"a retention age must be a whole number of seconds from 1 to {MAX_DURATION_S:.0f} "
            f"(100 years), not {after_s!r}"
        )
    return after_s


def format_after(seconds: int) -> str:
    """The shortest exact spelling :func:`parse_after` reads back (``2592000`` -> ``30d``)."""
    for unit in ("w", "d", "h", "m"):
        if seconds % _UNIT_S[unit] == 0:
            return f"{seconds // _UNIT_S[unit]}{unit}"
    return f"{seconds}s"


def cutoff_us(now: datetime, after_s: int) -> int:
    """The instant (µs since the epoch) a job must have been unchanged since to be past a
    rule of ``after_s``."""
    return to_us(now) - after_s * 1_000_000
