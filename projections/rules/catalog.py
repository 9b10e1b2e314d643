"""The projection catalogue: every view jobledger derives from the history, by name.

A projection names its schema version, its table and the table's key and columns, and the
events that may change its rows (its rules, in the modules named after it, apply them; a test
replays real histories event by event to hold the two together). The version is the one thing
a change to a projection's rules or columns must bump: a database whose recorded version
(``jl_meta`` key ``projection:<name>:version``) differs is *stale*, and ``jobledger migrate``
(or ``init``) rebuilds it from the history.
"""

from __future__ import annotations

from typing import Literal, NamedTuple

from ledger.core.events import (
    DEFINITION_EVENTS,
    JOB_EVENTS,
    JobDeadLettered,
    JobRequeued,
    JobSucceeded,
)
from projections.rules.audit import COLUMNS as AUDIT_COLUMNS
from projections.rules.queue import COLUMNS as QUEUE_COLUMNS

Mode = Literal["inline", "tracked"]


class Projection(NamedTuple):
    name: str
    version: int
    table: str
    key: tuple[str, ...]
    columns: tuple[str, ...]
    schema_prefix: str
    """Its ``schema_*`` statements in ``ledger/sql``: this name and names starting ``<it>_``."""
    events: tuple[str, ...] = ()
    """The events whose application may change its rows (by name); any other event leaves
    them as they are (tested against the replay)."""
    mode: Mode = "inline"
    description: str = ""


ALL_JOB_EVENTS = tuple(cls.name for cls in JOB_EVENTS)

QUEUE = Projection(
    "queue",
    1,
    "jl_queue",
    ("job_id",),
    QUEUE_COLUMNS,
    "schema_queue",
    ALL_JOB_EVENTS,
    description="one row per job: the fold of its history (what claims read)",
)
DEFINITIONS = Projection(
    "definitions",
    1,
    "jl_definitions",
    ("job_type",),
    ("job_type", "enabled", "version", "stream_version", "state"),
    "schema_definitions",
    tuple(cls.name for cls in DEFINITION_EVENTS),
    description="one row per job type: the fold of its definition stream",
)
SYNC_STATE = Projection(
    "sync_state",
    1,
    "jl_sync_state",
    ("source_id", "uri"),
    ("source_id", "uri", "revision", "content_hash", "last_seen_at", "last_ingested_at"),
    "schema_sync_state",
    (JobSucceeded.name,),
    description="one row per (source_id, uri): what was last ingested",
)
DEAD_LETTERS = Projection(
    "dead_letters",
    1,
    "jl_dead_letters",
    ("job_id",),
    (
        "job_id",
        "job_type",
        "org",
        "source_id",
        "uri",
        "run_number",
        "attempt",
        "code",
        "dead_at",
        "snapshot",
    ),
    "schema_dead_letters",
    (JobDeadLettered.name, JobRequeued.name, JobSucceeded.name),
    description="one row per dead job, with its state at death",
)

AUDIT = Projection(
    "audit",
    2,
    "jl_audit",
    ("position",),
    AUDIT_COLUMNS,
    "schema_audit",
    ALL_JOB_EVENTS,
    mode="tracked",
    description="one row per job event, indexed for audit queries (tracked)",
)

PROJECTIONS: tuple[Projection, ...] = (QUEUE, DEFINITIONS, SYNC_STATE, DEAD_LETTERS, AUDIT)
BY_NAME: dict[str, Projection] = {p.name: p for p in PROJECTIONS}

SHADOW_SUFFIX = "__rebuild"
"""A rebuild writes ``<table>__rebuild`` (and ``<index>__rebuild``) before the swap."""


def version_key(name: str) -> str:
    """The ``jl_meta`` key recording the schema version a projection's table was built by."""
    return f"projection:{name}:version"


def tracked(projections: tuple[Projection, ...] | list[Projection]) -> list[Projection]:
    """The tracked ones of ``projections``."""
    return [p for p in projections if p.mode == "tracked"]


def get(name: str) -> Projection:
    """The projection called ``name``; ``KeyError`` names the known ones."""
    try:
        return BY_NAME[name]
    except KeyError:
        raise KeyError(f"unknown projection {name!r}; known: {', '.join(BY_NAME)}") from None
