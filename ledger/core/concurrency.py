"""Concurrency limits: which limited keys a claim may still lease, and how many (pure).

A job type's definition may bound the leases alive at once of the type (``concurrency``), of
the type per org (``per_org_concurrency``; jobs without an org are one org) and of every type
naming one resource (``resource`` with ``resource_limit``). A lease is alive while the queue
view says ``leased``: a finish or a reap (``job_lease_expired``) frees its slot in the very
transaction that records it, and a lease past its expiry that no reaper has ended yet still
holds its slot (its worker may still be running it).

The claim (:mod:`ledger.jobs.claim_limits`) counts the live leases of the keys it may touch
under a lock that serialises such claims, builds a :class:`Room` from them, and admits its
candidates in claim order while each of a candidate's keys has room.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import NamedTuple

import msgspec

from ledger.core.state import JobState
from ledger.core.values import JobDefinition

NO_ORG = ""
"""How the counts spell "no org" (the queue view's ``coalesce(org, '')``)."""


class TypeLimits(NamedTuple):
    """One job type's concurrency limits (``None``: that kind of limit is not set)."""

    job_type: str
    concurrency: int | None
    per_org: int | None
    resource: str | None
    resource_limit: int | None


def limits_of(definition: JobDefinition) -> TypeLimits | None:
    """The type's limits; ``None`` if it has none (its claims pay nothing for limits)."""
    concurrency = definition.concurrency
    per_org = definition.per_org_concurrency
    resource = definition.resource
    resource_limit = definition.resource_limit
    if (
        concurrency is msgspec.UNSET
        and per_org is msgspec.UNSET
        and resource is msgspec.UNSET
        and resource_limit is msgspec.UNSET
    ):
        return None
    return TypeLimits(
        definition.job_type,
        None if concurrency is msgspec.UNSET else concurrency,
        None if per_org is msgspec.UNSET else per_org,
        None if resource is msgspec.UNSET else resource,
        None if resource_limit is msgspec.UNSET else resource_limit,
    )


def resource_limits(limits: Iterable[TypeLimits]) -> dict[str, int]:
    """Each resource's limit: the smallest any type naming it declares."""
    found: dict[str, int] = {}
    for item in limits:
        if item.resource is not None and item.resource_limit is not None:
            known = found.get(item.resource)
            found[item.resource] = (
                item.resource_limit if known is None else min(known, item.resource_limit)
            )
    return found


def lock_keys(limits: Iterable[TypeLimits]) -> list[str]:
    """The keys a claim of these types locks, sorted (one order everywhere: no deadlock).
    A type's key covers its per-org limits too; a resource's covers every type naming it,
    including types the claim does not ask for."""
    keys = {f"type:{item.job_type}" for item in limits}
    keys |= {f"resource:{item.resource}" for item in limits if item.resource is not None}
    return sorted(keys)


def org_key(org: str | None) -> str:
    return NO_ORG if org is None else org


class Room:
    """The room left under every limit, from the live leases per (type, org); :meth:`take`
    as jobs are admitted. Types without limits always have room."""

    def __init__(
        self,
        limits: Mapping[str, TypeLimits],
        live: Mapping[tuple[str, str], int],
    ) -> None:
        self._limits = limits
        self._resource_limits = resource_limits(limits.values())
        self._of_type: Counter[str] = Counter()
        self._of_pair: Counter[tuple[str, str]] = Counter()
        self._of_resource: Counter[str] = Counter()
        for (job_type, org), count in live.items():
            self._count(job_type, org, count)

    def _count(self, job_type: str, org: str, count: int) -> None:
        self._of_type[job_type] += count
        self._of_pair[(job_type, org)] += count
        limits = self._limits.get(job_type)
        if limits is not None and limits.resource is not None:
            self._of_resource[limits.resource] += count

    def leased(self, job_type: str, org: str | None = None) -> int:
        """Live leases of the type (of one org of it, given ``org``)."""
        if org is None:
            return self._of_type[job_type]
        return self._of_pair[(job_type, org)]

    def busiest_org(self, job_type: str) -> int:
        """The live leases of the type's org that has the most."""
        return max((n for (t, _), n in self._of_pair.items() if t == job_type), default=0)

    def leased_of_resource(self, resource: str) -> int:
        return self._of_resource[resource]

    def resource_limit(self, resource: str) -> int | None:
        return self._resource_limits.get(resource)

    def admits(self, job_type: str, org: str | None) -> bool:
        """Whether one more lease of ``job_type`` for ``org`` stays within every limit."""
        limits = self._limits.get(job_type)
        if limits is None:
            return True
        if limits.concurrency is not None and self._of_type[job_type] >= limits.concurrency:
            return False
        pair = (job_type, org_key(org))
        if limits.per_org is not None and self._of_pair[pair] >= limits.per_org:
            return False
        if limits.resource is not None:
            cap = self._resource_limits.get(limits.resource)
            if cap is not None and self._of_resource[limits.resource] >= cap:
                return False
        return True

    def take(self, job_type: str, org: str | None) -> None:
        self._count(job_type, org_key(org), 1)

    def full_types(self) -> set[str]:
        """Limited types no further job of which fits (type or resource limit reached)."""
        return {
            job_type
            for job_type, limits in self._limits.items()
            if (limits.concurrency is not None and self._of_type[job_type] >= limits.concurrency)
            or (
                limits.resource is not None
                and limits.resource in self._resource_limits
                and self._of_resource[limits.resource] >= self._resource_limits[limits.resource]
            )
        }

    def full_orgs(self) -> set[tuple[str, str]]:
        """(type, org) pairs at their per-org limit."""
        return {
            pair
            for pair, count in self._of_pair.items()
            if (limits := self._limits.get(pair[0])) is not None
            and limits.per_org is not None
            and count >= limits.per_org
        }


def admit(candidates: Sequence[JobState], room: Room) -> tuple[list[JobState], bool]:
    """The candidates that fit, in order, each taking its room; and whether any did not."""
    admitted: list[JobState] = []
    refused = False
    for state in candidates:
        org = state.request.org
        if room.admits(state.job_type, org):
            room.take(state.job_type, org)
            admitted.append(state)
        else:
            refused = True
    return admitted, refused


class LimitUse(msgspec.Struct, frozen=True):
    """One limit and how much of it the live leases take (``jobledger stats``)."""

    kind: str
    """``type``, ``org`` (a type's per-org limit, ``leased`` of its busiest org) or
    ``resource``."""
    name: str
    """The job type, or the resource."""
    limit: int
    leased: int


def limit_uses(limits: Mapping[str, TypeLimits], room: Room) -> list[LimitUse]:
    """Every limit of ``limits`` with its live leases, types first, then resources."""
    uses: list[LimitUse] = []
    for job_type, item in sorted(limits.items()):
        if item.concurrency is not None:
            uses.append(LimitUse("type", job_type, item.concurrency, room.leased(job_type)))
        if item.per_org is not None:
            busiest = room.busiest_org(job_type)
            uses.append(LimitUse("org", job_type, item.per_org, busiest))
    for resource, cap in sorted(resource_limits(limits.values()).items()):
        uses.append(LimitUse("resource", resource, cap, room.leased_of_resource(resource)))
    return uses
