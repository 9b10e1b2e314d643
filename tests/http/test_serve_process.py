"""``jobledger serve`` as an operator runs it, a process of its own with its output kept:
what it prints with ``--token-file``, its one-time login link, ``--allowed-host``, Ctrl-C."""

from __future__ import annotations

import re
import signal
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

from ledger.api.ledger import Ledger
from tests.http.conftest import free_port, spawn_serve, wait_until_up

LINK = re.compile(r"(http://127\.0\.0\.1:\d+)/login#code=(\S+)")


@contextmanager
def serving(
    db_url: str, tmp_path: Path, *options: str
) -> Iterator[tuple[httpx.Client, subprocess.Popen[bytes], Path]]:
    """A ``serve`` process on a free port, its stdout and stderr in a file of its own."""
    port = free_port()
    output = tmp_path / f"serve-{port}.log"
    with output.open("wb") as sink:
        process = spawn_serve(db_url, port, *options, output=sink)
    with httpx.Client(base_url=f"http://127.0.0.1:{port}") as client:
        try:
            wait_until_up(client, process)
            yield client, process, output
        finally:
            if process.poll() is None:
                process.terminate()
                process.wait(timeout=10)


def test_token_file_prints_no_secret_and_a_login_link_good_for_one_login(
    sqlite_url: str, tmp_path: Path
) -> None:
    """``serve --token-file F`` writes the secret to F (mode 0600) and prints neither it nor
    any part of it: the file's path and a login link holding a one-time code, which logs in
    once (a second use is 401) and is not a bearer token."""
    token_file = tmp_path / "admin-token"
    with serving(sqlite_url, tmp_path, "--token-file", str(token_file)) as (client, _, output):
        secret = token_file.read_text().strip()
        assert token_file.stat().st_mode & 0o777 == 0o600
        printed = output.read_text()
        assert secret not in printed and secret.rsplit("_", 1)[1] not in printed, printed
        assert str(token_file.resolve()) in printed
        match = LINK.search(printed)
        assert match is not None, printed
        code = match.group(2)
        assert (
            client.get("/api/v1/jobs", headers={"Authorization": f"Bearer {code}"}).status_code
            == 401
        )
        first = client.post("/login", data={"code": code}, follow_redirects=False)
        assert first.status_code == 303 and "jobledger_session" in first.cookies
        client.cookies = first.cookies
        assert client.get("/jobs").status_code == 200
        client.cookies.clear()
        again = client.post("/login", data={"code": code}, follow_redirects=False)
        assert again.status_code == 401 and "jobledger_session" not in again.cookies
    assert LINK.search(output.read_text()) is not None


def test_allowed_host_names_another_host_the_server_answers_to(
    sqlite_url: str, tmp_path: Path
) -> None:
    """``--allowed-host NAME`` (repeatable) is answered besides localhost and IP addresses;
    any other name is still 400."""
    options = ("--allowed-host", "jobs.internal", "--allowed-host", "Queue.Example")
    with serving(sqlite_url, tmp_path, *options) as (client, _, _):
        for host in ("jobs.internal", "queue.example:8765", "localhost"):
            assert client.get("/health", headers={"Host": host}).status_code == 200, host
        assert client.get("/health", headers={"Host": "jobs.internal.evil"}).status_code == 400


def test_ctrl_c_stops_serve_without_a_traceback(sqlite_url: str, tmp_path: Path) -> None:
    """SIGINT (Ctrl-C) on ``serve``, a stream open, ends it cleanly: exit 130 (the shell's
    code for Ctrl-C), no traceback."""
    with serving(sqlite_url, tmp_path) as (client, process, output):
        with Ledger.open(sqlite_url) as ledger:
            secret = ledger.tokens.create(org=None, role="admin", label="test").secret
        headers = {"Authorization": f"Bearer {secret}"}
        with client.stream("GET", "/api/v1/events/stream", headers=headers) as stream:
            lines = stream.iter_lines()
            assert next(lines) == ": connected"
            process.send_signal(signal.SIGINT)
            list(lines)
        assert process.wait(timeout=15) == 130  # the shell's code for Ctrl-C
    printed = output.read_text()
    assert "Traceback" not in printed and "Error" not in printed, printed
    assert "Shutting down" in printed or "Finished server process" in printed, printed


def test_refusals_at_the_door_are_in_the_servers_log(sqlite_url: str, tmp_path: Path) -> None:
    """A body nested too deep (422) and a foreign ``Host`` (400) are each logged by the
    server with the method and path, or the host, refused."""
    with Ledger.open(sqlite_url) as ledger:
        secret = ledger.tokens.create(org=None, role="admin", label="test").secret
    with serving(sqlite_url, tmp_path) as (client, _, output):
        deep = "[" * 1_000 + "]" * 1_000
        headers = {"Authorization": f"Bearer {secret}", "Content-Type": "application/json"}
        assert client.post("/api/v1/jobs", content=deep, headers=headers).status_code == 422
        assert client.get("/health", headers={"Host": "rebound.example"}).status_code == 400
        client.get("/health")  # the log is written before this answer
        printed = output.read_text()
    assert "refused POST /api/v1/jobs: its JSON body is nested too deep" in printed, printed
    assert "refused a request for host 'rebound.example'" in printed, printed
