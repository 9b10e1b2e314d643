"""The layers hold at run time too: importing the pure core loads no driver."""

from __future__ import annotations

import subprocess
import sys

import pytest

DRIVERS = ("psycopg", "psycopg_pool", "sqlite3", "eventsourcing")


@pytest.mark.parametrize(
    "module",
    [
        "ledger.core.values",
        "ledger.core.events",
        "ledger.core.state",
        "ledger.core.decide",
        "ledger.core.lost_attempts",
        "ledger.core.requests",
        "ledger.core.codec",
        "ledger.core.decision_replay",
        "ledger.core.replay_checks",
        "ledger.core.replay_findings",
        "ledger.views.catalog",
        "ledger.views.rows_from_history",
    ],
)
def test_importing_the_core_loads_no_driver(module: str) -> None:
    """A fresh interpreter that imports a pure module has loaded none of the drivers."""
    probe = (
        f"import sys, {module}\n"
        f"loaded = sorted(m for m in sys.modules if m.split('.')[0] in {DRIVERS!r})\n"
        "print(','.join(loaded))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == ""


def test_public_names_load_on_first_use() -> None:
    """``from ledger import Ledger`` works (it loads the store), and so does every name in
    ``ledger.__all__``; an unknown name is an AttributeError."""
    probe = (
        "import sys, ledger\n"
        "assert 'psycopg' not in sys.modules\n"
        "for name in ledger.__all__:\n"
        "    getattr(ledger, name)\n"
        # The store is loaded; eventsourcing comes with a backend (sqlite3/psycopg), once
        # a ledger is opened: no module above the backends needs it at import.
        "assert 'ledger.store.store' in sys.modules\n"
        "assert 'ledger.store.unit_of_work' in sys.modules\n"
        "try:\n"
        "    ledger.NoSuchName\n"
        "except AttributeError:\n"
        "    print('ok')\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "ok"


def test_no_import_cycle_between_project_modules() -> None:
    """No module of ledger, projections or cli imports (even only for type checking) a module
    that imports it back, directly or through others: each strongly connected part of the
    import graph is one module."""
    import grimp  # import-linter's graph builder

    graph = grimp.build_graph("ledger", "projections", "cli")
    modules = graph.modules
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def visit(module: str) -> None:  # Tarjan's strongly connected components
        index[module] = low[module] = len(index)
        stack.append(module)
        for imported in graph.find_modules_directly_imported_by(module):
            if imported not in modules:
                continue
            if imported not in index:
                visit(imported)
                low[module] = min(low[module], low[imported])
            elif imported in stack:
                low[module] = min(low[module], index[imported])
        if low[module] == index[module]:
            part = []
            while True:
                member = stack.pop()
                part.append(member)
                if member == module:
                    break
            if len(part) > 1:
                cycles.append(sorted(part))

    for module in sorted(modules):
        if module not in index:
            visit(module)
    assert cycles == []
