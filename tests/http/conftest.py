"""A real ``jobledger serve`` process on a free port, over the test's database."""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import pytest

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
    process: subprocess.Popen[bytes]


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


@pytest.fixture
def server(db_url: str) -> Iterator[Server]:
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "cli.main", "--db", db_url, "serve", "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{port}"
    with httpx.Client(base_url=base) as client:
        try:
            wait_until_up(client, process)
            yield Server(base, client, process)
        finally:
            process.terminate()
            process.wait(timeout=10)
