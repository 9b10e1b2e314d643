"""The inline-view registry is the one list: the store, the replay and the catalogue agree."""

from __future__ import annotations

import re

import pytest
from projection_helpers import populate

from ledger import Ledger
from ledger.core.events import JobEvent
from ledger.core.state import JobState, evolve
from ledger.core.values import RateLimit
from ledger.store.queries import load
from ledger.views import registry
from ledger.views.catalog import BY_NAME, PROJECTIONS
from ledger.views.rows_from_history import Replay

BACKENDS = ("postgres", "sqlite")
_WRITES_TABLE = re.compile(r"^\s*(?:INSERT\s+INTO|DELETE\s+FROM|UPDATE)\s+(\w+)", re.I)


def test_registry_catalogue_and_replay_agree_on_the_views() -> None:
    """Every inline view of the catalogue is registered, every registered view is in the
    catalogue (once, inline), and the replay derives rows for exactly the catalogue's views."""
    inline = [p.name for p in PROJECTIONS if p.mode == "inline"]
    assert [p.name for p in registry.INLINE] == inline
    assert len(set(inline)) == len(inline)
    assert all(BY_NAME[p.name] is p for p in registry.INLINE)
    assert Replay().views == tuple(p.name for p in PROJECTIONS)
    for view in registry.WRITTEN:
        assert view.projection.mode == "inline"
        assert Replay().count(view.projection.name) == 0


@pytest.mark.parametrize("backend", BACKENDS)
def test_every_declared_write_has_an_apply_and_sql_in_the_backend(backend: str) -> None:
    """Each named write a view declares has its in-memory apply and a query of that name in
    the backend's SQL files, and every named SQL statement that writes a written view's table
    is one the view declares (a write added only to SQL would not be replayed)."""
    sql = load(backend)
    for view in registry.WRITTEN:
        for query, apply in view.applies.items():
            assert callable(apply)
            assert query in sql, (backend, query)
            assert registry.APPLIES[query][0] == view.projection.name
        writers = {
            name
            for name, statement in sql.items()
            if (match := _WRITES_TABLE.match(statement))
            and match.group(1) == view.projection.table
            and not name.startswith("schema_")
        }
        assert writers == set(view.applies), (backend, view.projection.name)


def test_a_real_history_uses_exactly_the_declared_writes(db_url: str) -> None:
    """Folding a history that exercises every view produces only declared writes, and each
    declared write at least once (so the declarations are neither short nor stale)."""
    populate(db_url)
    with Ledger.open(db_url) as ledger:
        [dead] = [d.job_id for d in ledger.dead_letters() if d.snapshot.subject is None]
        ledger.requeue(dead)
        ledger.define("rated", rate=RateLimit(limit=5, period_s=60.0))
        ledger.enqueue("rated")
        assert ledger.claim("w-rated", types=["rated"])
        with ledger.store.read_snapshot() as tables:
            events = tables.events_after(0, 100_000)
    states: dict[object, JobState] = {}
    used: dict[str, set[str]] = {view.projection.name: set() for view in registry.WRITTEN}
    for item in events:
        if not isinstance(item.event, JobEvent):
            continue
        state = states[item.originator_id] = evolve(states.get(item.originator_id), item.event)
        for view in registry.WRITTEN:
            used[view.projection.name] |= {w.query for w in view.writes(item.event, state)}
    for view in registry.WRITTEN:
        assert used[view.projection.name] == set(view.applies), view.projection.name


def test_views_write_only_for_the_event_types_they_declare(db_url: str) -> None:
    """On a history that exercises every view, a view's rule writes nothing for an event type
    it does not declare (WrittenView.events), so view_writes, which asks only the declaring
    views, gives what asking every view would."""
    populate(db_url)
    with Ledger.open(db_url) as ledger:
        [dead] = [d.job_id for d in ledger.dead_letters() if d.snapshot.subject is None]
        ledger.requeue(dead)
        ledger.define("rated", rate=RateLimit(limit=5, period_s=60.0))
        ledger.enqueue("rated")
        assert ledger.claim("w-rated", types=["rated"])
        with ledger.store.read_snapshot() as tables:
            events = tables.events_after(0, 100_000)
    states: dict[object, JobState] = {}
    declared_writes = 0
    for item in events:
        if not isinstance(item.event, JobEvent):
            continue
        state = states[item.originator_id] = evolve(states.get(item.originator_id), item.event)
        every_view: list[object] = []
        for view in registry.WRITTEN:
            writes = view.writes(item.event, state)
            if not isinstance(item.event, view.events):
                assert writes == [], (view.projection.name, type(item.event).__name__)
            declared_writes += len(writes)
            every_view += writes
        assert registry.view_writes(item.event, state) == every_view
    assert declared_writes > 0
