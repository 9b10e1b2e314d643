"""Who wins when a worker's code and an operator disagree on a job type's definition.

The stored definition wins: a starting worker defines only the types that are missing and,
where its handler's options differ from the stored definition, logs the difference and
keeps the stored one. ``worker --apply-definitions`` applies the code's options, as an event.
Run as real ``jobledger worker`` processes.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import uuid
from pathlib import Path

import pytest

from ledger import Ledger
from ledger.core.events import JobTypeDefined, JobTypeUpdated

JOBLEDGER = str(Path(sys.executable).with_name("jobledger"))

APP = textwrap.dedent(
    """
    from ledger.runtime.handlers import Registry

    registry = Registry()

    @registry.handler("mail", max_attempts=3, timeout_s=60)
    async def mail(ctx):
        return None
    """
)


@pytest.fixture
def app_dir(tmp_path: Path) -> tuple[Path, str]:
    """A directory holding a handlers module under a fresh name."""
    name = f"jl_defs_app_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{name}.py").write_text(APP)
    return tmp_path, f"{name}:registry"


def worker(url: str, app: tuple[Path, str], *extra: str) -> subprocess.CompletedProcess[str]:
    """A real ``jobledger worker --burst`` process over the app's registry."""
    directory, target = app
    argv = [JOBLEDGER, "--db", url, "worker", "--app", target, "--burst"]
    result = subprocess.run(
        [*argv, *extra], check=False, cwd=directory, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    return result


def definition_events(url: str, job_type: str) -> list[tuple[str, int]]:
    """The history's definition events of ``job_type``: (event name, max_attempts)."""
    with Ledger.open(url) as ledger, ledger.store.read_snapshot() as snapshot:
        events = [e.event for page in snapshot.pages(0, snapshot.head(), 500) for e in page]
    return [
        (event.name, event.definition.max_attempts)
        for event in events
        if isinstance(event, JobTypeDefined | JobTypeUpdated)
        and event.definition.job_type == job_type
    ]


def test_worker_start_keeps_an_operators_definition(db_url: str, app_dir: tuple[Path, str]) -> None:
    """An operator's `define mail --max-attempts 10` survives a worker whose handler says 3:
    no job_type_updated is appended, and the worker logs the fields that differ."""
    with Ledger.open(db_url) as ledger:
        ledger.define("mail", max_attempts=10)
    result = worker(db_url, app_dir)
    assert definition_events(db_url, "mail") == [("job_type_defined", 10)]
    with Ledger.open(db_url) as ledger:
        definition = ledger.definition("mail")
    assert definition is not None
    assert (definition.max_attempts, definition.default_timeout_s) == (10, 900.0)
    [warning] = [line for line in result.stderr.splitlines() if "differs" in line]
    assert "WARNING" in warning and "mail" in warning
    assert "max_attempts: stored 10, handler 3" in warning
    assert "default_timeout_s: stored 900.0, handler 60.0" in warning
    assert "--apply-definitions" in warning


def test_apply_definitions_applies_the_codes_values_with_an_event(
    db_url: str, app_dir: tuple[Path, str]
) -> None:
    """`worker --apply-definitions` replaces the differing fields by the handler's, as one
    job_type_updated event and a log line; other fields (priority) stay as stored."""
    with Ledger.open(db_url) as ledger:
        ledger.define("mail", max_attempts=10, default_priority=7)
    result = worker(db_url, app_dir, "--apply-definitions")
    assert definition_events(db_url, "mail") == [("job_type_defined", 10), ("job_type_updated", 3)]
    with Ledger.open(db_url) as ledger:
        definition = ledger.definition("mail")
    assert definition is not None
    assert (definition.max_attempts, definition.default_timeout_s) == (3, 60.0)
    assert definition.default_priority == 7
    assert "updated job type mail from its handler: max_attempts 10 -> 3" in result.stderr
    # Applied once, a second start finds nothing to change.
    worker(db_url, app_dir, "--apply-definitions")
    assert len(definition_events(db_url, "mail")) == 2


def test_worker_defines_a_new_type_with_an_event_and_a_log_line(
    db_url: str, app_dir: tuple[Path, str]
) -> None:
    """A type nobody defined is defined from the handler's options: one job_type_defined
    event and a log line naming the type and its values."""
    result = worker(db_url, app_dir)
    assert definition_events(db_url, "mail") == [("job_type_defined", 3)]
    assert "defined job type mail from its handler: max attempts 3, timeout 60s" in result.stderr
