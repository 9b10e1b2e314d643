"""A real ``jobledger serve`` process on a free port, over the test's database."""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from typing import IO

import httpx
import pytest

from ledger.api.ledger import Ledger

START_TIMEOUT_S = 30.0


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@dataclass
class Server:
    base: str
    client: httpx.Client
    """Sends the admin token (no org) unless a request sets its own ``Authorization``."""
    process: subprocess.Popen[bytes]
    ledger: Ledger

    def as_token(self, secret: str | None) -> dict[str, str]:
        """Headers that send ``secret`` as the bearer (``None``: an empty ``Authorization``,
        which replaces the client's admin token: no token at all)."""
        return {"Authorization": "" if secret is None else f"Bearer {secret}"}

    def token(self, role: str, org: str | None) -> str:
        return self.ledger.tokens.create(org=org, role=role, label=f"{role} {org}").secret


def wait_until_up(client: httpx.Client, process: subprocess.Popen[bytes]) -> None:
    """Poll /health until the server answers (its socket is bound once uvicorn is up)."""
    for _ in range(int(START_TIMEOUT_S / 0.05)):
        if process.poll() is not None:
            raise RuntimeError(f"jobledger serve exited with {process.returncode}")
        try:
            client.get("/health", timeout=1.0)
            return
        except httpx.TransportError:
            try:
                process.wait(timeout=0.05)
            except subprocess.TimeoutExpired:
                continue
    raise RuntimeError("jobledger serve did not come up")


def spawn_serve(
    db_url: str, port: int, *options: str, output: IO[bytes] | None = None
) -> subprocess.Popen[bytes]:
    """``jobledger --db DB serve --port PORT OPTIONS`` in a process of its own, its stdout
    and stderr into ``output`` (else nowhere). Ctrl-C is given its default disposition, as in
    a terminal: a suite started in the background by a non-interactive shell ignores SIGINT,
    and a child inheriting that would finish a Ctrl-C'd shutdown with 0 instead of 130."""
    command = ["--db", db_url, "serve", "--port", str(port), *options]
    return subprocess.Popen(
        [sys.executable, "-c", _WITH_CTRL_C, *command],
        stdout=output or subprocess.DEVNULL,
        stderr=output or subprocess.DEVNULL,
    )


_WITH_CTRL_C = (
    "import runpy, signal, sys; signal.signal(signal.SIGINT, signal.default_int_handler); "
    "sys.argv[0] = 'jobledger'; runpy.run_module('jobledger_cli.main', run_name='__main__')"
)


@pytest.fixture
def server(db_url: str, ledger: Ledger) -> Iterator[Server]:
    port = free_port()
    process = spawn_serve(db_url, port)
    base = f"http://127.0.0.1:{port}"
    admin = ledger.tokens.create(org=None, role="admin", label="tests").secret
    headers = {"Authorization": f"Bearer {admin}"}
    with httpx.Client(base_url=base, headers=headers) as client:
        try:
            wait_until_up(client, process)
            yield Server(base, client, process, ledger)
        finally:
            process.terminate()
            process.wait(timeout=10)
