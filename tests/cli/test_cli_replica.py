"""Reads from a PostgreSQL streaming replica (``--read-db`` / ``Reader.open_replica``), on a
real hot standby this module builds: a throwaway primary cluster and a ``pg_basebackup -R``
of it streaming on a port of its own (one pair for the module; a database per test).

What is pinned: every read-only command answers the same through the replica as through the
primary once the standby has replayed the primary's WAL (waited for by polling the replay
position, never by sleeping); the lag is shown (a stderr line, and a ``replica`` member of
JSON objects); nothing is written to, or even attempted on, the standby (its server log
records every refused statement, and holds none); commands that write keep using ``--db``,
and pointed at the replica they fail with one ``error:`` line.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from cli_helpers import assert_one_error_line
from click.testing import CliRunner, Result
from pg_faults import ThrowawayCluster, wait_for_replay

from jobledger_cli.main import cli
from ledger import FakeClock, JobStatus, Ledger, Reader
from ledger.core.errors import ReadOnlyDatabaseError
from ledger.core.values import Failure, FailureKind
from ledger.store.config import DatabaseUrlError

pytestmark = pytest.mark.postgres

LAG_LINE = re.compile(
    r"^reading from a replica, \d+\.\d s behind the primary \([\d,]+ bytes of WAL to replay\)"
)
REFUSED = re.compile(r"ERROR: .*(?:read-only transaction|during recovery).*$", re.M)
"""How the standby's log records a statement it refused to write."""


class Pair:
    """The module's primary and its hot standby."""

    def __init__(self) -> None:
        self.primary = ThrowawayCluster()
        try:
            self.standby = ThrowawayCluster(standby_of=self.primary)
        except BaseException:
            self.primary.remove()
            raise

    def refused_statements(self) -> list[str]:
        """The statements the standby refused to write, as its log records them."""
        return REFUSED.findall(self.standby.log.read_text(errors="replace"))

    def remove(self) -> None:
        self.standby.remove()
        self.primary.remove()


@pytest.fixture(scope="module")
def pair() -> Iterator[Pair]:
    clusters = Pair()
    try:
        yield clusters
    finally:
        clusters.remove()


class Urls:
    """One test's ledger: its database on the primary, the same database on the standby."""

    def __init__(self, pair: Pair, name: str) -> None:
        self.pair = pair
        self.primary = f"{pair.primary.url}/{name}"
        self.replica = f"{pair.standby.url}/{name}"

    def replayed(self) -> None:
        """Return once the standby has replayed everything the primary wrote so far."""
        wait_for_replay(self.pair.primary, self.pair.standby)


@pytest.fixture
def urls(pair: Pair) -> Iterator[Urls]:
    """A fresh ledger on the primary, replayed on the standby; dropped afterwards."""
    name = f"jl_replica_{uuid.uuid4().hex[:12]}"
    pair.primary.create_database(name)
    try:
        Ledger.open(f"{pair.primary.url}/{name}", create=True).close()
        here = Urls(pair, name)
        here.replayed()
        yield here
    finally:
        pair.primary.drop_database(name)


def jobledger(*argv: str, env: dict[str, str] | None = None) -> Result:
    return CliRunner().invoke(cli, list(argv), env=env)


class Seeded:
    """The ledger's jobs: succeeded, dead, cancelled, pending; the audit view caught up to
    an earlier point only (the primary's catch-up is what a replica's audit view shows)."""

    def __init__(self, url: str) -> None:
        clock = FakeClock()
        with Ledger.open(url, clock=clock) as ledger:
            ledger.define("t", max_attempts=1)
            self.succeeded = ledger.enqueue("t", {"i": 0}).job_id
            self.dead = ledger.enqueue("t", {"i": 1}).job_id
            self.cancelled = ledger.enqueue("t", {"i": 2}).job_id
            self.pending = ledger.enqueue("t", {"i": 3}).job_id
            ledger.catch_up()
            clock.advance(5)
            claims = {c.job_id: c.lease for c in ledger.claim("w@host-a:1", limit=2)}
            clock.advance(1)
            lease = claims[self.succeeded]
            assert lease is not None
            ledger.succeed(lease, output={"ok": True})
            dead_lease = claims[self.dead]
            assert dead_lease is not None
            ledger.fail(dead_lease, Failure(FailureKind.TERMINAL, "app.broken", "no"))
            ledger.cancel(self.cancelled)
            self.audit_behind = ledger.audit_lag()
        assert self.audit_behind > 0


def _json(result: Result) -> Any:
    assert result.exit_code == 0, (result.stdout, result.stderr)
    return json.loads(result.stdout)


def _without_replica(value: Any, *, added: tuple[str, ...] = ("replica",)) -> Any:
    """A JSON output without what reading from a replica added to it."""
    if isinstance(value, dict):
        return {k: v for k, v in value.items() if k not in added}
    return value


NOW_DEPENDENT = {"stats": ("at", "oldest_pending_age_s")}
"""Fields that move with the wall clock between two runs (the CLI's clock is the system's)."""


def _read_commands(jobs: Seeded) -> list[list[str]]:
    done = str(jobs.succeeded)
    return [
        ["jobs", "--json"],
        ["jobs", "--status", "pending", "--json"],
        ["jobs", "--at", "2026-01-01T00:00:03Z", "--json"],
        ["show", done, "--json"],
        ["history", done, "--json"],
        ["history", done, "--follow", "--linger", "0", "--json"],
        ["diagnose", done, "--json"],
        ["timeline", done, "--json"],
        ["replay", done, "--to-event", "2", "--json"],
        ["replay", "--check", "--all", "--json"],
        ["dlq", "--json"],
        ["definitions", "--json"],
        ["sync-state", "no-such-source", "--json"],
        ["projections", "status", "--json"],
        ["projections", "verify", "--json"],
        ["export"],
    ]


def test_every_read_only_command_answers_the_same_through_the_replica(urls: Urls) -> None:
    """jobs (and --at), show, history (and --follow), diagnose, timeline, replay, dlq,
    definitions, sync-state, projections status/verify and export print through --read-db
    what they print through --db, with the lag line on stderr (and a replica member in JSON
    objects) only through the replica; the standby refuses no statement meanwhile."""
    jobs = Seeded(urls.primary)
    urls.replayed()
    refused_before = len(urls.pair.refused_statements())
    for argv in _read_commands(jobs):
        direct = jobledger("--db", urls.primary, *argv)
        replica = jobledger("--db", urls.primary, "--read-db", urls.replica, *argv)
        assert direct.exit_code == replica.exit_code == 0, (argv, direct.stderr, replica.stderr)
        assert not LAG_LINE.search(direct.stderr), argv
        assert LAG_LINE.search(replica.stderr), (argv, replica.stderr)
        if argv[0] == "export" or "--follow" in argv:  # JSON Lines, or the export's lines
            assert replica.stdout == direct.stdout, argv
            continue
        through_db, through_replica = json.loads(direct.stdout), json.loads(replica.stdout)
        if isinstance(through_replica, dict):
            figures = through_replica["replica"]
            assert figures["standby"] and figures["primary"] == "compared", figures
            assert "replica" not in through_db
        assert _without_replica(through_replica) == through_db, argv
    assert urls.pair.refused_statements()[refused_before:] == []


def test_audit_and_stats_read_the_replicas_audit_view_as_the_primary_left_it(
    urls: Urls,
) -> None:
    """On a replica, audit and stats do not catch the audit view up (a write): they read it
    as the primary's catch-up left it and say how far behind it is; once the primary has
    caught it up and the standby replayed that, they answer as the primary does."""
    jobs = Seeded(urls.primary)
    urls.replayed()
    refused_before = len(urls.pair.refused_statements())
    behind = jobledger("--db", urls.primary, "--read-db", urls.replica, "audit", "--json")
    page = _json(behind)
    assert page["audit_lag"] == jobs.audit_behind
    assert f"its audit view is {jobs.audit_behind:,} events behind" in behind.stderr
    stats = _json(jobledger("--read-db", urls.replica, "stats", "--json"))
    assert stats["audit_lag"] == jobs.audit_behind
    assert urls.pair.refused_statements()[refused_before:] == []

    with Ledger.open(urls.primary) as ledger:
        head = ledger.store.head_position()
    direct = _json(jobledger("--db", urls.primary, "audit", "--json"))  # catches up, on --db
    assert direct["rows"][0]["position"] == head
    urls.replayed()
    for argv in (["audit", "--json"], ["audit", "--oldest", "--json"], ["stats", "--json"]):
        through_db = _json(jobledger("--db", urls.primary, *argv))
        replica = jobledger("--db", urls.primary, "--read-db", urls.replica, *argv)
        through_replica = _json(replica)
        assert "audit view" not in replica.stderr
        for field in NOW_DEPENDENT.get(argv[0], ()):
            through_db.pop(field), through_replica.pop(field)
        assert through_replica["audit_lag"] == 0
        added = ("replica", "audit_lag") if argv[0] == "audit" else ("replica",)
        assert _without_replica(through_replica, added=added) == through_db, argv
    rows = jobledger("--db", urls.primary, "--read-db", urls.replica, "audit", "--format", "jsonl")
    assert rows.exit_code == 0 and LAG_LINE.search(rows.stderr)
    assert json.loads(rows.stdout.splitlines()[0])["position"] == head
    assert urls.pair.refused_statements()[refused_before:] == []


def test_write_commands_keep_using_db_and_fail_cleanly_on_the_replica(urls: Urls) -> None:
    """With --read-db given, enqueue still writes to --db; pointed at the replica (--db),
    each write command fails with one store.read_only error line and no traceback, and
    nothing reaches the primary."""
    jobs = Seeded(urls.primary)
    urls.replayed()
    written = jobledger("--db", urls.primary, "--read-db", urls.replica, "enqueue", "t", '{"i": 9}')
    assert written.exit_code == 0, written.stderr
    assert "reading from a replica" not in written.stderr
    with Ledger.open(urls.primary) as ledger:
        head = ledger.store.head_position()
        assert ledger.counts()["pending"] == 2
    urls.replayed()
    for argv in (
        ["enqueue", "t", '{"i": 10}'],
        ["define", "u"],
        ["cancel", str(jobs.pending)],
        ["dlq", "requeue", str(jobs.dead)],
        ["projections", "catch-up"],
    ):
        result = jobledger("--db", urls.replica, *argv)
        assert_one_error_line(result, "error: store.read_only: PostgreSQL database")
        assert "writes go to the primary" in result.stderr
    # A rebuild replays the history (its progress is on stderr) before its first write.
    rebuild = jobledger("--db", urls.replica, "projections", "rebuild", "--all")
    assert rebuild.exit_code == 1 and "Traceback" not in rebuild.stderr
    assert rebuild.stderr.splitlines()[-1].startswith("error: store.read_only:")
    with Ledger.open(urls.primary) as ledger:
        assert ledger.store.head_position() == head


def test_the_python_reader_on_a_replica(urls: Urls) -> None:
    """Reader.open_replica reads what the primary holds, measures the lag (WAL compared with
    the primary when named), refuses catch-up before any statement, polls to follow a
    history (a standby cannot LISTEN), and its sessions keep their settings on the standby."""
    jobs = Seeded(urls.primary)
    urls.replayed()
    refused_before = len(urls.pair.refused_statements())
    with (
        Ledger.open(urls.primary) as ledger,
        Reader.open_replica(urls.replica, primary=urls.primary) as reader,
    ):
        assert type(reader) is Reader and reader.store.read_only
        assert reader.counts() == ledger.counts()
        assert reader.history(jobs.dead) == ledger.history(jobs.dead)
        lag = reader.replica_lag()
        assert lag is not None
        assert (lag.standby, lag.streaming, lag.primary) == (True, True, "compared")
        assert lag.behind_bytes is not None and lag.lag_s is not None
        with pytest.raises(ReadOnlyDatabaseError, match="caught up on its primary"):
            reader.catch_up()

        # Following a history: the new events arrive by replication, found by polling.
        follower = reader.follow_history(jobs.pending, poll_s=0.02, linger_s=0, timeout_s=20)
        seen = follower.records()
        assert next(seen).originator_version == 1
        ledger.cancel(jobs.pending)
        assert [r.originator_version for r in seen] == [2]
        assert follower.state is not None and follower.state.status is JobStatus.CANCELLED
        assert not reader.store.has_notifications

        with reader.store.datastore.get_connection() as conn:
            settings = conn.execute(
                "SELECT current_setting('idle_in_transaction_session_timeout') AS idle, "
                "current_setting('default_transaction_read_only') AS read_only, "
                "pg_is_in_recovery() AS standby"
            ).fetchone()
        assert settings == {"idle": "1min", "read_only": "on", "standby": True}
    assert urls.pair.refused_statements()[refused_before:] == []


def test_the_lag_says_what_it_could_compare(urls: Urls, pg_url: str) -> None:
    """Without a primary the lag is the standby's own estimate; a primary that is another
    cluster, the standby itself, or unreachable is named as such, with no byte count.
    $JOBLEDGER_READ_DB names the replica as --read-db does."""
    cases = {
        None: "not named",
        pg_url: "another cluster",  # the shared server: a different system identifier
        urls.replica: "not a primary",
        "postgresql://postgres@127.0.0.1:1/postgres": "unreachable",
    }
    for primary, verdict in cases.items():
        with Reader.open_replica(urls.replica, primary=primary) as reader:
            lag = reader.replica_lag()
        assert lag is not None and lag.standby
        assert (lag.primary, lag.behind_bytes) == (verdict, None), primary
    line = jobledger("jobs", env={"JOBLEDGER_READ_DB": urls.replica})  # --db: SQLite
    assert line.exit_code == 0
    assert re.search(r"^reading from a replica, \d+\.\d s behind the primary$", line.stderr, re.M)


def test_a_read_url_naming_a_primary_is_read_without_writing(urls: Urls) -> None:
    """A --read-db that is no standby (a primary; a promoted standby) reads, says it has no
    lag, and its sessions are read-only: a write through it is refused by the server."""
    Seeded(urls.primary)
    result = jobledger("--read-db", urls.primary, "stats", "--json")
    assert result.stderr.startswith("reading from --read-db, which is not a standby")
    assert _json(result)["replica"]["standby"] is False
    with Reader.open_replica(urls.primary) as reader:
        before = reader.store.head_position()
        with pytest.raises(ReadOnlyDatabaseError, match="read-only transaction"):
            Ledger(reader.store).enqueue("t", {"i": 11})
        assert reader.store.head_position() == before


def test_a_replica_url_must_be_postgres(tmp_path: Path) -> None:
    """Reader.open_replica refuses a SQLite URL (SQLite has no replicas)."""
    with pytest.raises(DatabaseUrlError, match="SQLite has no replicas"):
        Reader.open_replica(f"sqlite:///{tmp_path / 'x.db'}")


def test_the_read_db_is_refused_on_a_database_without_a_ledger(pair: Pair) -> None:
    """A replica of a database with no ledger is refused like --db would be."""
    name = f"jl_replica_empty_{uuid.uuid4().hex[:8]}"
    pair.primary.create_database(name)
    try:
        wait_for_replay(pair.primary, pair.standby)
        result = jobledger("--read-db", f"{pair.standby.url}/{name}", "jobs")
        assert_one_error_line(result, "error: store.not_initialised")
    finally:
        pair.primary.drop_database(name)


def test_the_standbys_log_records_a_refused_write(urls: Urls) -> None:
    """The standby refuses a write on its own and its log records it: the evidence the other
    tests read to show that nothing tried to write to it."""
    before = len(urls.pair.refused_statements())
    with (
        psycopg.connect(urls.replica, autocommit=True) as conn,
        pytest.raises(psycopg.errors.ReadOnlySqlTransaction),
    ):
        conn.execute("CREATE TABLE jl_should_not_exist (x int)")
    [refused] = urls.pair.refused_statements()[before:]
    assert "CREATE TABLE" in refused
