"""Rate limits as token buckets kept by one number: the bucket's theoretical arrival time.

A bucket of ``limit`` tokens refilled at ``limit / period`` is the generic cell rate
algorithm: each spend pushes the *theoretical arrival time* ``tat`` to ``max(tat, at) +
interval`` (``interval = period / limit``, rounded up to the microsecond so the rate is never
exceeded), and at ``now`` the bucket holds ``limit + floor((now - tat) / interval)`` tokens,
clamped to ``[0, limit]``. All in integer microseconds, so the live claim, the SQL write and
the replay compute the same bucket from the same lease events, exactly. ``tat`` is an
absolute time; a changed policy (another limit or interval) starts its buckets afresh (full),
and a bucket of another policy limits nothing.

A bucket's key is ``(job_type, scope, org)``: scope ``type`` (org ``""``) for a per-type
limit, ``org`` and the job's org (``""`` for none) for a per-org one. Pure.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from ledger.core.errors import InvalidRequestError
from ledger.core.values import RateLimit

TYPE_SCOPE = "type"
ORG_SCOPE = "org"

_US = 1_000_000
MAX_RATE_LIMIT = 2**31 - 1
MAX_PERIOD_S = 366 * 86_400.0
_UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86_400.0}
_RATE = re.compile(r"\s*(\d+)\s*/\s*(\d+(?:\.\d+)?)?\s*([smhd])\s*")


def parse_rate(text: str, *, per_org: bool = False) -> RateLimit:
    """A rate written ``N/PERIOD`` (``10/1m``, ``100/1h``, ``5/30s``, ``1000/d``), checked."""
    found = _RATE.fullmatch(text)
    if found is None:
        raise InvalidRequestError(
            f"rate {text!r} is not N/PERIOD (a count, a slash, a period such as 1m, 30s, 1h, 1d)"
        )
    count, amount, unit = found.groups()
    period_s = float(amount or 1) * _UNITS[unit]
    return check_rate(RateLimit(limit=int(count), period_s=period_s, per_org=per_org))


def rate_text(rate: RateLimit) -> str:
    """``rate`` as :func:`parse_rate` reads it (``10/1m``), plus `` per org`` if it is."""
    amount, unit = rate.period_s, "s"
    for name, size in (("d", 86_400.0), ("h", 3600.0), ("m", 60.0)):
        if rate.period_s >= size and (rate.period_s / size).is_integer():
            amount, unit = rate.period_s / size, name
            break
    return f"{rate.limit}/{amount:g}{unit}{' per org' if rate.per_org else ''}"


def check_rate(rate: RateLimit) -> RateLimit:
    """Refuse a rate no bucket can keep: a limit outside ``[1, 2**31)``, a period outside
    ``(0, 366 days]`` or under a microsecond per token."""
    if not 1 <= rate.limit <= MAX_RATE_LIMIT:
        raise InvalidRequestError(f"a rate's limit must be 1 to {MAX_RATE_LIMIT}")
    if not 0 < rate.period_s <= MAX_PERIOD_S or rate.period_s * _US < rate.limit:
        raise InvalidRequestError(
            "a rate's period must be positive, at most 366 days, and at least 1 µs per token"
        )
    return rate


class RateKey(NamedTuple):
    """Which bucket a lease spends from."""

    job_type: str
    scope: str
    org: str


def rate_scope(rate: RateLimit) -> str:
    """The scope of ``rate``'s buckets."""
    return ORG_SCOPE if rate.per_org else TYPE_SCOPE


def rate_key(job_type: str, org: str | None, rate: RateLimit) -> RateKey:
    """The bucket a job of ``job_type`` and ``org`` spends from under ``rate``."""
    if rate.per_org:
        return RateKey(job_type, ORG_SCOPE, org or "")
    return RateKey(job_type, TYPE_SCOPE, "")


def kept_under(rate: RateLimit, limit: int, interval: int) -> bool:
    """Whether a bucket last charged under ``limit`` tokens ``interval`` µs apart is kept under
    ``rate``: a bucket of another policy limits nothing, a changed rate starts afresh."""
    return limit == rate.limit and interval == interval_us(rate)


def interval_us(rate: RateLimit) -> int:
    """Microseconds between tokens: the period over the limit, rounded up."""
    period_us = round(rate.period_s * _US)
    return -(-period_us // rate.limit)


def spend(tat_us: int | None, rate: RateLimit, at_us: int) -> int:
    """The bucket's ``tat`` after one token is spent at ``at_us`` (``None``: a full bucket)."""
    start = at_us if tat_us is None else max(tat_us, at_us)
    return start + interval_us(rate)


def tokens(tat_us: int | None, rate: RateLimit, now_us: int) -> int:
    """The tokens the bucket holds at ``now_us`` (``None``: never spent, full)."""
    if tat_us is None:
        return rate.limit
    return max(0, min(rate.limit, rate.limit + (now_us - tat_us) // interval_us(rate)))


def next_token_us(tat_us: int, rate: RateLimit) -> int:
    """When the bucket next holds a token: at or after this time a claim may spend one."""
    return tat_us - (rate.limit - 1) * interval_us(rate)
