"""The projection catalogue: every view jobledger derives from the history, by name.

A projection names its schema version, its table and the table's key and columns, and the
events that may change its rows (its rules, in the module named after it, declare the entry and
apply them; a test replays real histories event by event to hold the two together). The inline
ones come from :mod:`ledger.views.registry`. The version is the one thing
a change to a projection's rules or columns must bump: a database whose recorded version
(``jl_meta`` key ``projection:<name>:version``) differs is *stale*, and ``jobledger migrate``
(or ``init``) rebuilds it from the history.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ledger.views import audit, registry
from ledger.views.view import ALL_JOB_EVENTS, SHADOW_SUFFIX, Mode, Projection

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = [
    "ALL_JOB_EVENTS",
    "AUDIT",
    "BY_NAME",
    "DEAD_LETTERS",
    "DEFINITIONS",
    "PROJECTIONS",
    "QUEUE",
    "QUEUE_STATES",
    "RATE_BUCKETS",
    "SCHEDULES",
    "SHADOW_SUFFIX",
    "SOURCE_POLLS",
    "SYNC_STATE",
    "TOKENS",
    "Mode",
    "Projection",
    "by_name",
    "get",
    "projections",
    "recorded_version",
    "resolve",
    "stale",
    "tracked",
    "version_key",
]

TRACKED: tuple[Projection, ...] = (audit.PROJECTION,)
"""Views kept by a follower (:mod:`projections.tracked`), behind the events."""

PROJECTIONS: tuple[Projection, ...] = (*registry.INLINE, *TRACKED)
"""Every built-in view, the inline ones (from the registry) first."""
BY_NAME: dict[str, Projection] = {p.name: p for p in PROJECTIONS}


def projections() -> tuple[Projection, ...]:
    """Every view, :data:`PROJECTIONS` and then the views of kinds registered at run time
    (:func:`ledger.views.registry.register_kind`), before the tracked ones."""
    extra = registry.registered_views()
    return PROJECTIONS if not extra else (*registry.INLINE, *extra, *TRACKED)


def by_name() -> dict[str, Projection]:
    """:func:`projections`, by name."""
    extra = registry.registered_views()
    return BY_NAME if not extra else {p.name: p for p in projections()}


QUEUE = BY_NAME["queue"]
DEFINITIONS = BY_NAME["definitions"]
SYNC_STATE = BY_NAME["sync_state"]
DEAD_LETTERS = BY_NAME["dead_letters"]
AUDIT = BY_NAME["audit"]
TOKENS = BY_NAME["tokens"]
SCHEDULES = BY_NAME["schedules"]
SOURCE_POLLS = BY_NAME["source_polls"]
QUEUE_STATES = BY_NAME["queue_states"]
RATE_BUCKETS = BY_NAME["rate_buckets"]


def version_key(name: str) -> str:
    """The ``jl_meta`` key recording the schema version a projection's table was built by."""
    return f"projection:{name}:version"


def recorded_version(meta: dict[str, str], projection: Projection) -> int | None:
    """The schema version ``jl_meta`` records for ``projection`` (``None``: none yet)."""
    recorded = meta.get(version_key(projection.name))
    return int(recorded) if recorded is not None else None


def stale(meta: dict[str, str]) -> list[Projection]:
    """The projections whose recorded version differs from the code's (none recorded: not
    stale — the table was built by this code), in catalogue order."""
    return [p for p in projections() if recorded_version(meta, p) not in (None, p.version)]


def tracked(projections: tuple[Projection, ...] | list[Projection]) -> list[Projection]:
    """The tracked ones of ``projections``."""
    return [p for p in projections if p.mode == "tracked"]


def get(name: str) -> Projection:
    """The projection called ``name``; ``KeyError`` names the known ones."""
    known = by_name()
    try:
        return known[name]
    except KeyError:
        raise KeyError(f"unknown projection {name!r}; known: {', '.join(known)}") from None


def resolve(names: Sequence[str] | None) -> list[Projection]:
    """The projections named (all of them for ``None``), in catalogue order."""
    if names is None:
        return list(projections())
    known = by_name()
    unknown = [name for name in names if name not in known]
    if unknown:
        raise KeyError(f"unknown projection {unknown[0]!r}; known: {', '.join(known)}")
    return [p for p in projections() if p.name in names]
