"""The commands' happy paths, in-process against real SQLite and PostgreSQL databases."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from uuid import UUID

import pytest
from cli_helpers import Run, event_count, invoke

from ledger import BackoffPolicy, JobDefinition, JobStatus, Ledger, Subject, SubjectOp


def _define(url: str, job_type: str = "send_email", **options: Any) -> None:
    with Ledger.open(url) as ledger:
        ledger.define(job_type, **options)


def _job_id(stdout: str) -> UUID:
    return UUID(stdout.strip())


# --- init -------------------------------------------------------------------------------------


def test_init_twice_on_a_new_sqlite_file(tmp_path: Path) -> None:
    """init creates the tables in a new file, and a second init says it already was done."""
    path = tmp_path / "new.db"
    first = invoke(str(path), "init")
    assert first.exit_code == 0, first.stderr
    assert first.stdout == f"initialised SQLite database {path}\n"
    second = invoke(str(path), "init")
    assert second.exit_code == 0, second.stderr
    assert second.stdout == f"SQLite database {path} already initialised\n"
    with Ledger.open(str(path)) as ledger:
        assert ledger.counts() == {}


def test_init_twice_on_an_empty_postgres_database_hides_the_password(empty_pg_url: str) -> None:
    """init initialises an empty PostgreSQL database once, and never prints the password."""
    url = empty_pg_url.replace("postgres@", "postgres:s3cret@")  # trust auth ignores it
    first = invoke(url, "init")
    second = invoke(url, "init")
    assert (first.exit_code, second.exit_code) == (0, 0), first.stderr + second.stderr
    assert first.stdout == f"initialised PostgreSQL database {empty_pg_url}\n"
    assert second.stdout == f"PostgreSQL database {empty_pg_url} already initialised\n"
    assert "s3cret" not in first.output + second.output
    with Ledger.open(empty_pg_url) as ledger:
        assert ledger.definitions() == []


def test_init_on_an_initialised_ledger_appends_nothing(run: Run, db_url: str) -> None:
    """init on a ledger in use leaves its events alone."""
    _define(db_url)
    before = event_count(db_url)
    result = run("init")
    assert result.exit_code == 0
    assert result.stdout.endswith("already initialised\n")
    assert event_count(db_url) == before


def test_database_comes_from_the_environment_then_the_default_file(
    sqlite_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without --db the CLI uses $JOBLEDGER_DB, and without that ./jobledger.db."""
    monkeypatch.setenv("JOBLEDGER_DB", sqlite_url)
    assert invoke(None, "define", "from_env").exit_code == 0
    with Ledger.open(sqlite_url) as ledger:
        assert ledger.definition("from_env") is not None

    monkeypatch.delenv("JOBLEDGER_DB")
    monkeypatch.chdir(tmp_path)
    result = invoke(None, "init")
    assert result.exit_code == 0, result.stderr
    assert result.stdout == f"initialised SQLite database {tmp_path / 'jobledger.db'}\n"


# --- job types --------------------------------------------------------------------------------


def test_define_records_every_option(run: Run, db_url: str) -> None:
    """define passes each option to the definition it records."""
    result = run(
        "define", "resize", "--version", "2", "--max-attempts", "3", "--timeout", "45",
        "--priority", "7", "--backoff-base", "1", "--backoff-max", "30",
        "--backoff-jitter", "0.1", "--disabled",
    )  # fmt: skip
    assert result.exit_code == 0, result.stderr
    assert result.stdout.startswith("defined resize: version 2, disabled, max attempts 3")
    with Ledger.open(db_url) as ledger:
        assert ledger.definition("resize") == JobDefinition(
            job_type="resize",
            version=2,
            max_attempts=3,
            default_timeout_s=45.0,
            default_priority=7,
            enabled=False,
            backoff=BackoffPolicy(base_s=1.0, max_s=30.0, jitter=0.1),
        )


def test_define_reports_defined_unchanged_and_updated(run: Run, db_url: str) -> None:
    """define says what it did, and an identical re-definition appends nothing."""
    first = run("define", "send_email", "--json")
    assert json.loads(first.stdout) == {
        "change": "defined",
        "job_type": "send_email",
        "version": 1,
        "max_attempts": 8,
        "default_timeout_s": 900.0,
        "default_priority": 100,
        "enabled": True,
        "backoff": {"base_s": 2.0, "max_s": 3600.0, "jitter": 0.25},
        "concurrency": None,
        "per_org_concurrency": None,
        "resource": None,
        "resource_limit": None,
        "rate": None,
    }
    before = event_count(db_url)
    assert run("define", "send_email").stdout.startswith("unchanged send_email:")
    assert event_count(db_url) == before
    assert run("define", "send_email", "--max-attempts", "2").stdout.startswith("updated")
    with Ledger.open(db_url) as ledger:
        definition = ledger.definition("send_email")
        assert definition is not None
        assert definition.max_attempts == 2


def test_disable_and_enable_toggle_the_definition(run: Run, db_url: str) -> None:
    """disable and enable flip the type's enabled flag and say so."""
    _define(db_url)
    assert run("disable", "send_email").stdout == "disabled send_email\n"
    with Ledger.open(db_url) as ledger:
        assert ledger.definition("send_email") == JobDefinition(
            job_type="send_email", enabled=False
        )
    assert run("enable", "send_email").stdout == "enabled send_email\n"
    with Ledger.open(db_url) as ledger:
        definition = ledger.definition("send_email")
        assert definition is not None
        assert definition.enabled


def test_definitions_lists_types_as_a_table_and_as_json(run: Run, db_url: str) -> None:
    """definitions prints a sorted aligned table, or the full definitions as JSON."""
    assert run("definitions").stdout == "no job types defined\n"
    assert json.loads(run("definitions", "--json").stdout) == []
    _define(db_url, "zeta", max_attempts=2)
    _define(db_url, "alpha", enabled=False)
    lines = run("definitions").stdout.splitlines()
    assert lines[0].split() == [
        "TYPE", "VERSION", "ENABLED", "ATTEMPTS", "TIMEOUT", "PRIORITY", "BACKOFF", "LIMITS",
        "RATE",
    ]  # fmt: skip
    assert lines[1].split()[:4] == ["alpha", "1", "no", "8"]
    assert lines[2].split()[:4] == ["zeta", "1", "yes", "2"]
    starts = [lines[0].index(header) for header in lines[0].split()]
    for line in lines[1:]:  # every cell starts under its header
        assert all(line[at - 2 : at] == "  " and line[at] != " " for at in starts[1:])
    listed = json.loads(run("definitions", "--json").stdout)
    assert [d["job_type"] for d in listed] == ["alpha", "zeta"]
    assert listed[0]["enabled"] is False


# --- enqueue ----------------------------------------------------------------------------------


def test_enqueue_passes_every_field_to_the_ledger(run: Run, db_url: str) -> None:
    """enqueue prints the new id, and the job holds the payload and each option given."""
    _define(db_url)
    result = run(
        "enqueue", "send_email", '{"to": "ada@example.com", "n": [1, 2]}',
        "--priority", "5", "--run-at", "2030-05-01T12:00:00+02:00", "--max-attempts", "2",
        "--timeout", "30", "--org", "acme", "--queue", "mail", "--idempotency-key", "k1",
    )  # fmt: skip
    assert result.exit_code == 0, result.stderr
    with Ledger.open(db_url) as ledger:
        state = ledger.get(_job_id(result.stdout))
    assert state is not None
    assert state.job_type == "send_email"
    assert state.payload == {"to": "ada@example.com", "n": [1, 2]}
    assert (state.priority, state.max_attempts, state.timeout_s) == (5, 2, 30.0)
    assert state.run_at == datetime(2030, 5, 1, 10, 0, tzinfo=UTC)
    assert (state.org, state.queue, state.idempotency_key) == ("acme", "mail", "k1")
    assert state.status is JobStatus.PENDING


def test_enqueue_with_delay_and_defaults(run: Run, db_url: str) -> None:
    """--delay pushes run_at past the enqueue time; unset options take the type's defaults."""
    _define(db_url, max_attempts=4, default_priority=9)
    result = run("enqueue", "send_email", "--delay", "90")
    assert result.exit_code == 0, result.stderr
    with Ledger.open(db_url) as ledger:
        state = ledger.get(_job_id(result.stdout))
    assert state is not None
    assert state.payload == {}
    assert state.run_at == state.enqueued_at + timedelta(seconds=90)
    assert (state.priority, state.max_attempts) == (9, 4)


def test_enqueue_reads_the_payload_from_a_file_and_from_stdin(
    run: Run, db_url: str, tmp_path: Path
) -> None:
    """PAYLOAD may be @FILE or - (stdin)."""
    _define(db_url)
    payload_file = tmp_path / "payload.json"
    payload_file.write_text('{"from": "file"}')
    from_file = run("enqueue", "send_email", f"@{payload_file}")
    from_stdin = run("enqueue", "send_email", "-", stdin='{"from": "stdin"}')
    with Ledger.open(db_url) as ledger:
        file_state = ledger.get(_job_id(from_file.stdout))
        stdin_state = ledger.get(_job_id(from_stdin.stdout))
    assert file_state is not None and file_state.payload == {"from": "file"}
    assert stdin_state is not None and stdin_state.payload == {"from": "stdin"}


def test_enqueue_idempotent_repeat_prints_the_same_id(run: Run, db_url: str) -> None:
    """A repeat with the same idempotency key prints the first job's id and appends nothing."""
    _define(db_url)
    first = run("enqueue", "send_email", '{"a": 1}', "--idempotency-key", "once")
    before = event_count(db_url)
    again = run("enqueue", "send_email", '{"a": 1}', "--idempotency-key", "once", "--json")
    assert again.exit_code == 0, again.stderr
    assert json.loads(again.stdout) == {"job_id": first.stdout.strip()}
    assert event_count(db_url) == before


def test_enqueue_for_a_subject_with_a_live_job_enqueues_nothing(run: Run, db_url: str) -> None:
    """A second job for a subject with a live job: exit 0, empty stdout, a note on stderr."""
    _define(db_url, "sync_doc")
    subject = ("--source-id", "crm", "--uri", "doc/1")
    first = run("enqueue", "sync_doc", *subject, "--op", "delete", "--revision", "r7")
    with Ledger.open(db_url) as ledger:
        state = ledger.get(_job_id(first.stdout))
    assert state is not None
    assert state.subject == Subject(
        source_id="crm", uri="doc/1", op=SubjectOp.DELETE, revision="r7"
    )
    before = event_count(db_url)

    second = run("enqueue", "sync_doc", *subject)
    assert second.exit_code == 0
    assert second.stdout == ""
    assert second.stderr == "nothing enqueued: source 'crm' uri 'doc/1' already has a live job\n"
    as_json = run("enqueue", "sync_doc", *subject, "--json")
    assert json.loads(as_json.stdout)["job_id"] is None
    assert event_count(db_url) == before


def test_enqueue_auto_define_defines_an_unknown_type_with_defaults(run: Run, db_url: str) -> None:
    """--auto-define defines an unknown type with the default definition, then enqueues."""
    result = run("enqueue", "brand_new", "--auto-define")
    assert result.exit_code == 0, result.stderr
    with Ledger.open(db_url) as ledger:
        assert ledger.definition("brand_new") == JobDefinition(job_type="brand_new")
        state = ledger.get(_job_id(result.stdout))
        assert state is not None and state.job_type == "brand_new"


# --- show and history -------------------------------------------------------------------------


def _leased_job_with_progress(url: str) -> UUID:
    """A job enqueued, claimed by worker w1, and reporting progress 3/10."""
    with Ledger.open(url) as ledger:
        ledger.define("send_email", max_attempts=3)
        job_id = ledger.enqueue("send_email", {"to": "ada"}, org="acme").job_id
        assert job_id is not None
        [state] = ledger.claim("w1")
        assert state.lease is not None
        ledger.progress(state.lease, stage="running", done=3, total=10)
    return job_id


def _labelled(text: str) -> dict[str, str]:
    """``show``'s text as {label: value}; the values start in one column."""
    lines = text.splitlines()
    column = lines[0].index(lines[0].split()[-1])
    assert all(line[column - 2 : column] == "  " for line in lines)
    return {line[:column].strip(): line[column:] for line in lines}


def test_show_prints_the_current_state(run: Run, db_url: str) -> None:
    """show prints status, run, attempts, worker, lease, progress and payload aligned."""
    job_id = _leased_job_with_progress(db_url)
    result = run("show", str(job_id))
    assert result.exit_code == 0, result.stderr
    lines = _labelled(result.stdout)
    assert lines["job"] == str(job_id)
    assert lines["status"] == "leased (stage running)"
    assert (lines["run"], lines["attempts"]) == ("1", "1 of 3")
    assert lines["worker"] == "w1"
    assert lines["lease expires"].endswith("Z")
    assert lines["progress"] == "3/10"
    assert lines["payload"] == '{"to":"ada"}'
    assert lines["org"] == "acme"


def test_show_json_is_the_whole_state_with_defaults_kept(run: Run, db_url: str) -> None:
    """show --json has every state field (even at its default) plus job_type and payload."""
    _define(db_url)
    job_id = _job_id(run("enqueue", "send_email", '{"x": 1}').stdout)
    shown = json.loads(run("show", str(job_id), "--json").stdout)
    assert shown["job_id"] == str(job_id)
    assert shown["job_type"] == "send_email"
    assert shown["payload"] == {"x": 1}
    assert shown["status"] == "pending"
    assert (shown["attempt"], shown["run_number"], shown["worker_id"]) == (0, 1, None)
    assert shown["org"] is None and shown["subject"] is None
    with Ledger.open(db_url) as ledger:
        state = ledger.get(job_id)
    assert state is not None
    assert datetime.fromisoformat(shown["run_at"]) == state.run_at


def test_history_lists_the_events_in_order(run: Run, db_url: str) -> None:
    """history prints one row per event, oldest first, as text and as a JSON array."""
    job_id = _leased_job_with_progress(db_url)
    with Ledger.open(db_url) as ledger:
        expected = [type(record.event).name for record in ledger.history(job_id)]
    assert expected == ["job_enqueued", "job_leased", "job_stage_changed", "job_progressed"]

    text = run("history", str(job_id)).stdout.splitlines()
    assert text[0].split() == ["VERSION", "EVENT", "AT", "FIELDS"]
    assert [line.split()[:2] for line in text[1:]] == [
        [str(n), name] for n, name in enumerate(expected, start=1)
    ]
    assert "worker_id=w1" in text[2]

    events = json.loads(run("history", str(job_id), "--json").stdout)
    assert [(e["version"], e["event"]) for e in events] == list(enumerate(expected, start=1))
    assert events[0]["fields"]["request"]["payload"] == {"to": "ada"}
    assert events[3]["fields"] == {
        "run_number": 1,
        "attempt": 1,
        "done": 3,
        "total": 10,
        "checkpoint": None,
    }


def test_progress_off_a_terminal_is_not_shown(run: Run) -> None:
    """With stderr not a terminal (a pipe, a log, CI), a long command prints no progress at
    all: its result on stdout says what was done (tests/cli/test_cli_output_style.py has the
    terminal side and a real pipe)."""
    assert run("define", "t").exit_code == 0
    assert run("enqueue", "t").exit_code == 0
    for args in (["projections", "verify"], ["projections", "rebuild", "--all"]):
        result = run(*args)
        assert result.exit_code == 0, result.stderr
        assert "verify" not in result.stderr and "replay" not in result.stderr, result.stderr
