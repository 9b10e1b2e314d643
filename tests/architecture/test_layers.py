"""The layers hold at run time too: importing the pure core loads no driver."""

from __future__ import annotations

import subprocess
import sys

import pytest

DRIVERS = ("psycopg", "psycopg_pool", "sqlite3", "eventsourcing")


@pytest.mark.parametrize(
    "module",
    [
        "ledger.core.events",
        "ledger.core.state",
        "ledger.core.decide",
        "ledger.core.requests",
        "ledger.core.codec",
        "ledger.core.decision_replay",
        "ledger.core.replay_checks",
        "ledger.core.replay_findings",
        "projections.rules.catalog",
        "projections.rules.replay",
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
        "assert 'eventsourcing' in sys.modules\n"
        "try:\n"
        "    ledger.NoSuchName\n"
        "except AttributeError:\n"
        "    print('ok')\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "ok"
