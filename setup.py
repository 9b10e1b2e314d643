"""Only what pyproject.toml cannot say: the ``cli/`` folder installs as ``jobledger_cli``.

A top-level ``cli`` package would clash with any other distribution that installs one (see
docs/architecture.md, "Decisions recorded here"), and ``[tool.setuptools.packages]`` takes
either a ``find`` or a list, not a found list plus one renamed folder. Everything else is in
pyproject.toml.
"""

from setuptools import find_packages, setup

setup(
    packages=[
        *find_packages(include=["ledger", "ledger.*", "projections", "projections.*"]),
        "jobledger_cli",
    ],
    package_dir={"jobledger_cli": "cli"},
)
