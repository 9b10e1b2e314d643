"""``jobledger history --follow``: old events, then each new one as it commits, once, in order."""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import IO

from views_helpers import define_types, enqueue, invoke

from ledger import FakeClock, Ledger
from ledger.core.state import Lease

JOBLEDGER = Path(sys.executable).parent / "jobledger"
LINE_WAIT_S = 20.0
"""Generous: a line must arrive within this long of the commit that makes it."""


def _lines(stream: IO[str]) -> queue.Queue[str | None]:
    """The stream's lines as they arrive, then ``None`` at its end (read in a thread)."""
    lines: queue.Queue[str | None] = queue.Queue()

    def pump() -> None:
        for line in stream:
            lines.put(line)
        lines.put(None)

    threading.Thread(target=pump, daemon=True).start()
    return lines


def test_follow_streams_each_new_event_once_in_order(db_url: str, clock: FakeClock) -> None:
    """A real `history --follow --json` process prints the history, then each event appended
    while it runs (the next is appended only once the last was printed), and stops by itself
    once the job succeeded and stayed quiet. On PostgreSQL the poll interval is 60 s, so only
    the NOTIFY can deliver each event in time."""
    poll = "60" if db_url.startswith("postgresql") else "0.05"
    with Ledger.open(db_url, clock=clock) as ledger:
        define_types(ledger)
        job_id = enqueue(ledger)
        lease: list[Lease] = []

        def claim() -> None:
            [state] = ledger.claim("w1")
            assert state.lease is not None
            lease.append(state.lease)

        steps: list[Callable[[], object]] = [
            claim,
            lambda: ledger.heartbeat(lease[0]),
            lambda: ledger.progress(lease[0], stage="running", done=1, total=2),
            lambda: ledger.succeed(lease[0], output={"ok": True}),
        ]
        env = {key: value for key, value in os.environ.items() if key != "JOBLEDGER_DB"}
        argv = [str(JOBLEDGER), "--db", db_url, "history", str(job_id), "--follow", "--json"]
        argv += ["--poll", poll, "--linger", "0.3", "--timeout", "120"]
        process = subprocess.Popen(
            argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
        )
        try:
            assert process.stdout is not None
            lines = _lines(process.stdout)
            printed = [json.loads(lines.get(timeout=LINE_WAIT_S) or "null")]
            for step in steps:
                clock.advance(1)
                step()
                expected = len(ledger.history(job_id))
                while len(printed) < expected:
                    printed.append(json.loads(lines.get(timeout=LINE_WAIT_S) or "null"))
            assert lines.get(timeout=LINE_WAIT_S) is None  # the job is done: it stops itself
            assert process.wait(timeout=LINE_WAIT_S) == 0
        finally:
            process.kill()
            process.wait()
        history = ledger.history(job_id)
    assert [(e["version"], e["event"]) for e in printed] == [
        (r.originator_version, type(r.event).name) for r in history
    ]
    assert [e["event"] for e in printed] == [
        "job_enqueued",
        "job_leased",
        "job_heartbeated",
        "job_stage_changed",
        "job_progressed",
        "job_succeeded",
    ]
    assert process.stderr is not None
    assert process.stderr.read() == "stopped following: job is succeeded and quiet\n"


def test_follow_prints_a_finished_history_and_stops(db_url: str, clock: FakeClock) -> None:
    """A job already terminal: the whole history as fixed columns, then it stops at once."""
    with Ledger.open(db_url, clock=clock) as ledger:
        define_types(ledger)
        job_id = enqueue(ledger)
        ledger.cancel(job_id)
    result = invoke(db_url, "history", str(job_id), "--follow", "--linger", "0")
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["VERSION", "EVENT", "AT", "FIELDS"]
    assert [line.split()[:2] for line in lines[1:]] == [
        ["1", "job_enqueued"],
        ["2", "job_cancelled"],
    ]
    assert lines[1].index("20") == lines[0].index("AT")  # columns line up under the headers
    assert result.stderr == "stopped following: job is cancelled and quiet\n"


def test_follow_stops_at_the_timeout(db_url: str) -> None:
    """A live job that never finishes: --timeout ends the follow (exit 0, said on stderr)."""
    with Ledger.open(db_url) as ledger:
        define_types(ledger)
        job_id = enqueue(ledger)
    result = invoke(db_url, "history", str(job_id), "-f", "--json", "--timeout", "0.3")
    assert result.exit_code == 0, result.stderr
    [line] = result.stdout.splitlines()
    assert json.loads(line)["event"] == "job_enqueued"
    assert result.stderr == "stopped following: --timeout reached (job is pending)\n"


def test_follow_of_an_unknown_job_is_one_error_line(sqlite_url: str) -> None:
    """No job: job.not_found, exit 1, before following anything."""
    result = invoke(sqlite_url, "history", "0b7c0e8e-2b8f-4a53-9c8e-3f1d2c556a11", "--follow")
    assert result.exit_code == 1
    assert result.stdout == ""
    assert result.stderr.startswith("error: job.not_found: ")
