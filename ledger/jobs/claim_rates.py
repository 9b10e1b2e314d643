"""The rate step of a claim: keep only the due jobs their rate keys have tokens for.

The claim queries already skip the jobs of a key whose bucket is empty at ``now``; a key with
tokens left may still have more due jobs than tokens. For the due jobs of rate-limited types
(the query flags them, so a claim of unlimited types reads nothing more), this step locks
those types' claims (:meth:`UnitOfWork.lock_rate_types`), reads their definitions and
buckets, and keeps jobs in claim order while their key has a token. Each kept job is leased
with its type's rate, which is what spends the token: the lease's ``job_leased`` carries the
rate, and the bucket view is the fold of those (:mod:`ledger.views.rate_buckets`). The
jobs left out stay pending.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from uuid import UUID

import msgspec

from ledger.core.rates import RateKey, kept_under, rate_key, rate_scope, tokens
from ledger.core.state import JobState
from ledger.core.times import to_us
from ledger.core.values import RateLimit
from ledger.store.unit_of_work import UnitOfWork
from ledger.views.kinds import DEFINITIONS


class RatedClaim(msgspec.Struct, frozen=True):
    """The due jobs a claim leases, in claim order, and the rate each limited one spends."""

    due: list[JobState]
    rates: dict[UUID, RateLimit]


def within_rate(uow: UnitOfWork, due: Sequence[JobState], now: datetime) -> RatedClaim:
    """The jobs of ``due`` (the last :meth:`UnitOfWork.claimable`'s) their keys have room
    for at ``now`` (see the module docstring)."""
    limited = [state for state in due if state.job_id in uow.rate_limited]
    if not limited:
        return RatedClaim(list(due), {})
    job_types = sorted({state.job_type for state in limited})
    uow.lock_rate_types(job_types)
    policies = {
        job_type: found.definition.rate
        for job_type, found in uow.states(DEFINITIONS, job_types).items()
        if isinstance(found.definition.rate, RateLimit)
    }
    room = rooms(uow, policies, now)
    kept: list[JobState] = []
    rates: dict[UUID, RateLimit] = {}
    for state in due:
        rate = policies.get(state.job_type) if state.job_id in uow.rate_limited else None
        if rate is None:
            kept.append(state)
            continue
        key = rate_key(state.job_type, state.org, rate)
        left = room.get(key, rate.limit)
        if left < 1:
            continue
        room[key] = left - 1
        kept.append(state)
        rates[state.job_id] = rate
    return RatedClaim(kept, rates)


def rooms(uow: UnitOfWork, policies: dict[str, RateLimit], now: datetime) -> dict[RateKey, int]:
    """The tokens each bucket of ``policies``' types holds at ``now`` under the type's
    current policy (a key without a bucket of that policy is full)."""
    now_us = to_us(now)
    found: dict[RateKey, int] = {}
    for bucket in uow.rate_buckets(list(policies)):
        rate = policies[bucket.job_type]
        # A bucket of another scope or policy is left from an earlier one: it limits nothing.
        if bucket.scope == rate_scope(rate) and kept_under(
            rate, bucket.rate_limit, bucket.interval_us
        ):
            key = RateKey(bucket.job_type, bucket.scope, bucket.org)
            found[key] = tokens(bucket.tat, rate, now_us)
    return found
