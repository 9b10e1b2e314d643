"""A kind of state declared in the tests only — its events, fold, stream id rule, view row,
named queries and SQL — is appended, folded, read, verified and rebuilt on both backends
through the ledger's one mechanism, with no change to the store."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any
from uuid import UUID, uuid5

import msgspec
import pytest
from click.testing import CliRunner
from projection_helpers import raw

from jobledger_cli.main import cli
from ledger import Ledger
from ledger.clock import FakeClock
from ledger.core.events import Event
from ledger.core.state import IllegalTransitionError
from ledger.views.kind import StateKind
from ledger.views.registry import registered
from ledger.views.view import Projection

TOY_NAMESPACE = UUID("2a4e8c1d-5b3f-4d6a-9e7c-0f1b2c3d4e5f")


class ToyCounted(Event, frozen=True):
    """A toy's count goes up by ``by``: (none | counted) -> counted."""

    name = "toy_counted"
    toy: str
    by: int


class ToyState(msgspec.Struct, frozen=True):
    toy: str
    total: int
    version: int


def evolve_toy(state: ToyState | None, event: Event) -> ToyState:
    """The toy's fold: the running total. Pure."""
    if not isinstance(event, ToyCounted):
        raise IllegalTransitionError(f"not a toy event: {type(event).__name__}")
    if state is None:
        return ToyState(event.toy, event.by, 1)
    return ToyState(state.toy, state.total + event.by, state.version + 1)


def toy_stream_id(toy: str) -> UUID:
    return uuid5(TOY_NAMESPACE, f"toy:{toy}")


def toy_row(state: ToyState) -> dict[str, Any]:
    return {"toy": state.toy, "total": state.total, "stream_version": state.version}


def toy_of_row(row: Any) -> ToyState:
    return ToyState(row["toy"], int(row["total"]), int(row["stream_version"]))


def _toy_sql(param: str) -> str:
    """The toy's schema and queries, with the backend's placeholder for ``name``."""
    p = param.format
    return f"""
-- name: schema_toys
-- The toy kind's view (tests/projections/test_state_kinds.py): one row per toy.
CREATE TABLE IF NOT EXISTS jl_toys (
    toy text PRIMARY KEY,
    total bigint NOT NULL,
    stream_version integer NOT NULL
)

-- name: toys_upsert
-- A toy's row after its events (primary key).
INSERT INTO jl_toys (toy, total, stream_version)
VALUES ({p("toy")}, {p("total")}, {p("stream_version")})
ON CONFLICT (toy) DO UPDATE SET total = EXCLUDED.total, stream_version = EXCLUDED.stream_version

-- name: toys_get
-- One toy (primary key).
SELECT toy, total, stream_version FROM jl_toys WHERE toy = {p("toy")}

-- name: toys_all
-- Every toy, by name.
SELECT toy, total, stream_version FROM jl_toys ORDER BY toy
"""


TOY_VIEW = Projection(
    "toys",
    1,
    "jl_toys",
    ("toy",),
    ("toy", "total", "stream_version"),
    "schema_toys",
    ("toy_counted",),
    description="one row per toy: its running total",
)
TOYS: StateKind[str, ToyState] = StateKind(
    "toys",
    (ToyCounted,),
    evolve_toy,
    toy_stream_id,
    TOY_VIEW,
    toy_row,
    toy_of_row,
    upsert="toys_upsert",
    get="toys_get",
    all="toys_all",
    key_param="toy",
    key_of=lambda state: state.toy,
    sql={"sqlite": _toy_sql(":{}"), "postgres": _toy_sql("%({})s")},
)


@pytest.fixture
def toy_ledger(db_url: str) -> Iterator[Ledger]:
    """A ledger opened with the toy kind registered: ``create`` makes its missing table from
    the kind's SQL, as for a view of the ledger's own."""
    with registered(TOYS), Ledger.open(db_url, clock=FakeClock(), create=True) as ledger:
        assert "jl_toys" in ledger.store.schema_state()[0]
        try:
            yield ledger
        finally:
            raw(db_url, "DROP TABLE IF EXISTS jl_toys")  # the database may be handed out again


def _count(ledger: Ledger, *changes: tuple[str, int]) -> None:
    now = ledger.clock.now()
    with ledger.store.unit_of_work() as uow:
        uow.append([TOYS.change(toy, [ToyCounted(at=now, toy=toy, by=by)]) for toy, by in changes])


def test_a_toy_kind_is_appended_folded_and_read_with_no_change_to_the_store(
    toy_ledger: Ledger,
) -> None:
    """One append folds the toy's changes (two of one toy among them) in its streams; its
    rows read back through ``uow.state`` and ``store.state(s)``, beside the ledger's own."""
    toy_ledger.define("t")
    now = toy_ledger.clock.now()
    with toy_ledger.store.unit_of_work() as uow:
        uow.append(
            [
                TOYS.change("a", [ToyCounted(at=now, toy="a", by=2)]),
                TOYS.change("b", [ToyCounted(at=now, toy="b", by=5)]),
                TOYS.change("a", [ToyCounted(at=now, toy="a", by=3)]),
            ]
        )
        assert uow.state(TOYS, "a") == ToyState("a", 5, 2)
        assert uow.state(TOYS, "c") is None
    store = toy_ledger.store
    assert store.states(TOYS) == [ToyState("a", 5, 2), ToyState("b", 5, 1)]
    assert store.state(TOYS, "b") == ToyState("b", 5, 1)
    assert store.state(TOYS, "c") is None
    history = store.history(toy_stream_id("a"))
    assert [(r.originator_version, r.event) for r in history] == [
        (1, ToyCounted(at=now, toy="a", by=2)),
        (2, ToyCounted(at=now, toy="a", by=3)),
    ]
    job = toy_ledger.enqueue("t")
    assert (
        toy_ledger.store.get_job(job.job_id) is not None
    )  # the ledger's own kinds are as they were
    assert [d.job_type for d in toy_ledger.definitions()] == ["t"]


def test_a_toy_kind_is_verified_and_rebuilt_by_the_projections_commands(
    toy_ledger: Ledger, db_url: str
) -> None:
    """``projections verify`` replays the toy's stream with its declared fold and finds its
    drift; ``projections rebuild --all`` rewrites its table from the history."""
    _count(toy_ledger, ("a", 2), ("b", 5))
    _count(toy_ledger, ("a", 3))
    report = toy_ledger.projections().verify()
    assert report.clean, report
    [toys] = [view for view in report.views if view.name == "toys"]
    assert (toys.expected_rows, toys.live_rows) == (2, 2)

    raw(db_url, "UPDATE jl_toys SET total = 99 WHERE toy = ?", ("a",))
    raw(db_url, "DELETE FROM jl_toys WHERE toy = ?", ("b",))
    verified = CliRunner().invoke(cli, ["--db", db_url, "projections", "verify"])
    assert verified.exit_code == 1, verified.output
    assert "toys  DRIFT in 2 row(s)" in verified.output
    assert "total: expected 5, live 99" in verified.output

    rebuilt = CliRunner().invoke(cli, ["--db", db_url, "projections", "rebuild", "--all"])
    assert rebuilt.exit_code == 0, rebuilt.output
    assert "toys 2" in rebuilt.output
    assert toy_ledger.store.states(TOYS) == [ToyState("a", 5, 2), ToyState("b", 5, 1)]
    assert toy_ledger.projections().verify().clean
