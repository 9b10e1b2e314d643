"""Why pending jobs are not running: the reader's side of :mod:`ledger.core.blockers`.

Gathers what the pure blocker functions need — the queue-state view, the definitions, the
rate-bucket view and the live pools' reports — once per call.
"""

from __future__ import annotations

from datetime import datetime

import msgspec

from ledger.api.pools import read_pools
from ledger.core import blockers
from ledger.core.blockers import Blocker
from ledger.core.queue_pauses import QueueState
from ledger.core.rates import kept_under, next_token_us, rate_key, tokens
from ledger.core.state import JobState
from ledger.core.times import from_us, to_us
from ledger.core.values import RateLimit, queue_of
from ledger.store.store import Store
from ledger.views.kinds import DEFINITIONS, QUEUE_STATES
from ledger.views.rate_buckets import RateBucket


class BlockerFacts(msgspec.Struct, frozen=True):
    """What the blockers are judged on, read at one time."""

    queues: dict[str, QueueState]
    enabled: dict[str, bool]
    rates: dict[str, RateLimit]
    buckets: dict[tuple[str, str, str], RateBucket]
    pool_reasons: list[str]


def read_facts(store: Store, now: datetime) -> BlockerFacts:
    """The queue states, definitions, rate buckets and live pools' reasons at ``now``."""
    definitions = [state.definition for state in store.states(DEFINITIONS)]
    return BlockerFacts(
        queues={state.queue: state for state in store.states(QUEUE_STATES)},
        enabled={d.job_type: d.enabled for d in definitions},
        rates={d.job_type: d.rate for d in definitions if isinstance(d.rate, RateLimit)},
        buckets={(b.job_type, b.scope, b.org): b for b in store.rate_buckets()},
        pool_reasons=[
            reason for pool in read_pools(store) if not pool.stale(now) for reason in pool.reasons
        ],
    )


def blockers_of(state: JobState, facts: BlockerFacts, now: datetime) -> list[Blocker]:
    """Every reason ``state`` (a pending job) is not running at ``now``, in a fixed order."""
    rate = facts.rates.get(state.job_type)
    bucket = None if rate is None else facts.buckets.get(rate_key(state.job_type, state.org, rate))
    if bucket is not None and rate is not None:
        bucket = bucket if kept_under(rate, bucket.rate_limit, bucket.interval_us) else None
    found = [
        blockers.not_due(state, now),
        blockers.queue_paused(state, facts.queues.get(queue_of(state.queue))),
        blockers.rate_limited(state, rate, None if bucket is None else bucket.tat, now),
        blockers.breaker_open(state, facts.pool_reasons),
        blockers.type_disabled(state, facts.enabled.get(state.job_type)),
    ]
    return [blocker for blocker in found if blocker is not None]


class HeldBack(msgspec.Struct, frozen=True):
    """Something holding back a group of pending jobs now (``stats``): a paused queue, a rate
    key without a token, an open circuit breaker, a disabled type."""

    reason: str
    subject: str
    """The queue, job type (``type`` or ``type/org``), or type the reason is about."""
    message: str
    until: datetime | None = None


def held_back(store: Store, now: datetime) -> list[HeldBack]:
    """Everything holding back pending jobs at ``now``, by reason then subject."""
    facts = read_facts(store, now)
    found = [
        HeldBack("queue_paused", name, f"queue {name!r} paused" + _by_why(state))
        for name, state in sorted(facts.queues.items())
        if state.paused
    ]
    for _, bucket in sorted(facts.buckets.items()):
        rate = facts.rates.get(bucket.job_type)
        if rate is None or not kept_under(rate, bucket.rate_limit, bucket.interval_us):
            continue
        if tokens(bucket.tat, rate, to_us(now)) > 0:
            continue
        subject = bucket.job_type if bucket.scope == "type" else f"{bucket.job_type}/{bucket.org}"
        until = from_us(next_token_us(bucket.tat, rate))
        found.append(
            HeldBack(
                "rate_limited", subject, f"{subject} rate limited until {until.isoformat()}", until
            )
        )
    prefix = "circuit breaker open for "
    for reason in sorted(set(facts.pool_reasons)):
        if reason.startswith(prefix):
            found.append(HeldBack("breaker_open", reason.removeprefix(prefix), reason))
    found += [
        HeldBack("type_disabled", job_type, f"job type {job_type!r} is disabled")
        for job_type, enabled in sorted(facts.enabled.items())
        if not enabled
    ]
    return found


def _by_why(state: QueueState) -> str:
    by = f" by {state.actor}" if state.actor else ""
    why = f": {state.reason}" if state.reason else ""
    return f"{by} at {state.changed_at.isoformat()}{why}"
