"""``GET /health``: whether the ledger can be read and its views are current, with reasons.

``ok`` or ``degraded``; the reasons say what is wrong in words an operator acts on. Only a
ledger that cannot be read answers 503 (a load balancer should stop sending work); a stale
or lagging view, or the worker pools' verdict (:meth:`Reader.health`: no live pool, a stale
one counted dead, one reporting itself degraded) is ``degraded`` with 200, since every read
still answers.

The reasons and the details (each view's lag, the worker pools with their hosts and pids)
are for a token of no org (``Authorization: Bearer``, the rule of
:func:`~ledger.http.auth.sees_every_org`); without one, or with an org's, the answer is the
status alone, so an unauthenticated probe learns nothing of the machines."""

from __future__ import annotations

from typing import Any

from litestar import Response

from ledger.api.reader import Reader
from ledger.api.shaping import plain
from ledger.core.errors import LedgerError

LAG_LIMIT = 10_000
"""A tracked view (``audit``) this many events behind the history makes the server
``degraded``: ``audit`` and ``stats`` then catch up first, which takes long (nothing is
following: ``jobledger projections follow``, or a worker pool, keeps it near the head)."""


def health_of(reader: Reader, *, details: bool) -> Response[dict[str, Any]]:
    """The health answer, with its reasons and details only if ``details``."""
    try:
        statuses = reader.projections().status()
    except LedgerError as error:
        down = {"status": "degraded", "reasons": [f"cannot read the ledger: {error}"]}
        return Response(down if details else {"status": "degraded"}, status_code=503)
    reasons = [
        f"projection {s.name} is stale (built by v{s.recorded_version}, code is "
        f"v{s.code_version}): run `jobledger migrate`"
        for s in statuses
        if s.stale
    ]
    reasons += [
        f"projection {s.name} is {s.lag:,} events behind the history "
        "(is a follower running? `jobledger projections follow`)"
        for s in statuses
        if s.lag >= LAG_LIMIT
    ]
    pools = reader.health()
    reasons += pools.reasons
    status = "degraded" if reasons else "ok"
    if not details:
        return Response({"status": status}, status_code=200)
    body: dict[str, Any] = {
        "status": status,
        "reasons": reasons,
        "projections": {s.name: {"lag": s.lag, "stale": s.stale} for s in statuses},
        "pools": plain(pools.pools),
    }
    return Response(body, status_code=200)
