"""What the distribution installs: its top-level import names, its console script, its data.

A top-level ``cli`` would clash with any other distribution that installs one, so the ``cli/``
folder installs as ``jobledger_cli`` (setup.py; docs/architecture.md). ``.ci/run`` also
installs the built wheel into a clean venv and runs ``jobledger demo`` from it.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TOP_LEVEL = {"jobledger_cli", "ledger", "projections"}
SOURCES = ("pyproject.toml", "setup.py", "README.md", "cli", "ledger", "projections")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> zipfile.ZipFile:
    """The wheel built from a copy of the tree's sources (an in-tree ``build/`` of an older
    layout would otherwise leak its files into the wheel)."""
    tree = tmp_path_factory.mktemp("tree")
    for name in SOURCES:
        source = ROOT / name
        if source.is_dir():
            shutil.copytree(source, tree / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(source, tree / name)
    out = tmp_path_factory.mktemp("dist")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(out), str(tree)],
        check=True,
        capture_output=True,
    )
    (built,) = out.glob("jobledger-*.whl")
    return zipfile.ZipFile(built)


def _dist_info(wheel: zipfile.ZipFile, name: str) -> str:
    (path,) = [n for n in wheel.namelist() if n.endswith(f".dist-info/{name}")]
    return wheel.read(path).decode()


def test_the_wheel_installs_only_its_own_top_level_names(wheel: zipfile.ZipFile) -> None:
    """Every file the wheel installs is under jobledger_cli/, ledger/ or projections/ (or its
    dist-info): no top-level ``cli``."""
    tops = {name.split("/")[0] for name in wheel.namelist()}
    assert {top for top in tops if not top.endswith(".dist-info")} == TOP_LEVEL
    assert set(_dist_info(wheel, "top_level.txt").split()) == TOP_LEVEL


def test_the_wheel_holds_the_whole_cli_and_the_package_data(wheel: zipfile.ZipFile) -> None:
    """Each module of the cli/ folder is in the wheel as jobledger_cli, and the store's SQL
    and the dashboard's templates came along."""
    names = set(wheel.namelist())
    expected = {f"jobledger_cli/{path.name}" for path in (ROOT / "cli").glob("*.py")}
    assert expected <= names
    assert any(n.startswith("ledger/store/sql/") and n.endswith(".sql") for n in names)
    assert any(n.startswith("ledger/http/templates/") for n in names)
    assert "ledger/py.typed" in names


def test_the_console_script_is_the_installed_cli(wheel: zipfile.ZipFile) -> None:
    """``jobledger`` runs ``jobledger_cli.main:main``."""
    entry_points = _dist_info(wheel, "entry_points.txt")
    assert "jobledger = jobledger_cli.main:main" in entry_points


def test_the_install_here_does_not_claim_cli(tmp_path: Path) -> None:
    """Outside the checkout, this venv's install of jobledger offers no ``cli`` module, and a
    command run through jobledger_cli loads nothing named ``cli``."""
    probe = (
        "import importlib.util, sys\n"
        "from jobledger_cli.main import cli\n"
        "try:\n"
        "    cli.main(['--help'], prog_name='jobledger')\n"
        "except SystemExit:\n"
        "    pass\n"
        "print(importlib.util.find_spec('cli'), 'cli' in sys.modules)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], cwd=tmp_path, capture_output=True, text=True, check=True
    )
    assert done.stdout.strip().splitlines()[-1] == "None False"
