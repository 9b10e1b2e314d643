"""Opening and initialising databases: idempotent init, clear refusals."""

from __future__ import annotations

from pathlib import Path

import psycopg
import pytest

from ledger import DatabaseNotInitialisedError, DatabaseUnusableError, Ledger
from ledger.core.errors import InvalidRequestError
from ledger.store.config import resolve_url, sqlite_path
from ledger.store.schema import SCHEMA_VERSION


def test_init_is_idempotent_on_sqlite(tmp_path: Path) -> None:
    """Initialising twice is safe and keeps the data."""
    path = tmp_path / "l.db"
    with Ledger.open(str(path), create=True) as ledger:
        ledger.define("t")
        ledger.enqueue("t")
    with Ledger.open(f"sqlite:///{path}", create=True) as ledger:
        assert ledger.counts() == {"pending": 1}


def test_init_is_idempotent_on_postgres(empty_pg_url: str) -> None:
    """Initialising twice is safe and keeps the data."""
    with Ledger.open(empty_pg_url, create=True) as ledger:
        ledger.define("t")
        ledger.enqueue("t")
    with Ledger.open(empty_pg_url, create=True) as ledger:
        assert ledger.counts() == {"pending": 1}


def test_opening_an_uninitialised_database_says_to_run_init(
    tmp_path: Path, empty_pg_url: str
) -> None:
    """Without create, a database with no ledger is refused with store.not_initialised."""
    for url in (str(tmp_path / "new.db"), empty_pg_url):
        with pytest.raises(DatabaseNotInitialisedError, match="jobledger init") as caught:
            Ledger.open(url)
        assert caught.value.code == "store.not_initialised"


def test_a_file_that_is_not_sqlite_is_refused(tmp_path: Path) -> None:
    """A non-database file gives store.unusable, not a traceback from the driver."""
    path = tmp_path / "notes.txt"
    path.write_text("this is not a database, just some text " * 100)
    with pytest.raises(DatabaseUnusableError):
        Ledger.open(str(path), create=True)


def test_a_missing_directory_is_refused(tmp_path: Path) -> None:
    """A path whose directory does not exist is refused clearly."""
    with pytest.raises(DatabaseUnusableError, match="does not exist"):
        Ledger.open(str(tmp_path / "nope" / "l.db"), create=True)


def test_an_unreachable_postgres_server_is_refused() -> None:
    """Nothing listens on port 1: store.unusable with the reason."""
    with pytest.raises(DatabaseUnusableError) as caught:
        Ledger.open("postgresql://postgres@127.0.0.1:1/nope?connect_timeout=2")
    assert caught.value.code == "store.unusable"


def test_another_schema_version_is_refused(pg_url: str) -> None:
    """A database marked with a different schema version is not touched."""
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("UPDATE jl_meta SET value = '999' WHERE key = 'schema_version'")
    for create in (False, True):
        with pytest.raises(DatabaseUnusableError, match="schema 999"):
            Ledger.open(pg_url, create=create)
    assert SCHEMA_VERSION != "999"


def test_database_urls_resolve_as_documented(monkeypatch: pytest.MonkeyPatch) -> None:
    """Explicit URL, then $JOBLEDGER_DB, then ./jobledger.db; sqlite URL forms."""
    monkeypatch.delenv("JOBLEDGER_DB", raising=False)
    assert resolve_url() == "./jobledger.db"
    monkeypatch.setenv("JOBLEDGER_DB", "postgresql://h/db")
    assert resolve_url() == "postgresql://h/db"
    assert resolve_url("x.db") == "x.db"
    assert sqlite_path("sqlite:///rel/x.db") == "rel/x.db"
    assert sqlite_path("sqlite:////abs/x.db") == "/abs/x.db"
    with pytest.raises(InvalidRequestError):
        sqlite_path("mysql://h/db")
