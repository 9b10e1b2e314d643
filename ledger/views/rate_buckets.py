"""The rate-bucket view: one row per rate-limit key, the fold of the leases charged to it.

A ``job_leased`` that carries a rate (its type's, read in the claim's transaction) spends one
token of its key's bucket (:mod:`ledger.core.rates`): ``tat`` becomes ``max(tat, at) +
interval``. The row keeps the policy it was last charged under, and ``next_token_at``, when
the bucket next holds a token, which the claim queries compare with ``now`` to skip a key
that has none (``jl_rate_buckets`` primary key).
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

import msgspec

from ledger.core.events import JobEvent, JobLeased
from ledger.core.rates import interval_us, rate_key
from ledger.core.state import JobState
from ledger.core.times import to_us
from ledger.views.view import Key, MemoryTable, Params, Projection, WrittenView
from ledger.views.writes import ViewWrite

PROJECTION = Projection(
    "rate_buckets",
    1,
    "jl_rate_buckets",
    ("job_type", "scope", "org"),
    ("job_type", "scope", "org", "rate_limit", "interval_us", "tat", "next_token_at"),
    "schema_rate_buckets",
    (JobLeased.name,),
    description="one row per rate-limit key: its token bucket, from the leases charged to it",
)


class RateBucket(msgspec.Struct, frozen=True):
    """One row of the view: the bucket's ``tat`` and the policy it was last charged under."""

    job_type: str
    scope: str
    org: str
    rate_limit: int
    interval_us: int
    tat: int
    next_token_at: int


def bucket_of_row(row: Any) -> RateBucket:
    """A ``jl_rate_buckets`` row (indexable by column name) as a bucket."""
    return RateBucket(**{column: row[column] for column in PROJECTION.columns})


def writes(event: JobEvent, state: JobState) -> list[ViewWrite]:
    """A rate-charged lease's spend of one token."""
    if not isinstance(event, JobLeased) or event.rate is None:
        return []
    key = rate_key(state.job_type, state.org, event.rate)
    return [
        ViewWrite(
            SPEND,
            {
                "job_type": key.job_type,
                "scope": key.scope,
                "org": key.org,
                "rate_limit": event.rate.limit,
                "interval_us": interval_us(event.rate),
                "at": to_us(event.at),
            },
        )
    ]


# --- the named write (ledger/store/sql/<backend>.sql) and its in-memory twin ---------------

SPEND = "rate_buckets_spend"


def _apply_spend(table: MemoryTable, params: Params) -> Collection[Key]:
    """``INSERT … ON CONFLICT DO UPDATE``: ``tat = max(stored tat, at) + interval`` (a new
    row, or one of another policy: ``at + interval``), the policy replaced."""
    key = (params["job_type"], params["scope"], params["org"])
    stored = table.rows.get(key)
    limit, step = params["rate_limit"], params["interval_us"]
    kept = stored is not None and (stored["rate_limit"], stored["interval_us"]) == (limit, step)
    tat = (max(stored["tat"], params["at"]) if kept else params["at"]) + step  # type: ignore[index]
    table.rows[key] = {
        "job_type": key[0],
        "scope": key[1],
        "org": key[2],
        "rate_limit": limit,
        "interval_us": step,
        "tat": tat,
        "next_token_at": tat - (limit - 1) * step,
    }
    return (key,)


VIEW = WrittenView(
    projection=PROJECTION,
    writes=writes,
    applies={SPEND: _apply_spend},
    new_table=MemoryTable,
    events=(JobLeased,),
)
