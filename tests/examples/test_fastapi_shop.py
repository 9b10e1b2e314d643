"""examples/fastapi_shop.py runs as a user runs it: the app under uvicorn and `jobledger worker`
beside it, each its own process, on a real ledger; requests over real HTTP."""

from __future__ import annotations

import os
import socket
import sqlite3
import subprocess
import sys
import textwrap
import uuid
from collections.abc import Iterator
from contextlib import closing, contextmanager
from pathlib import Path

import httpx
import psycopg
import pytest

from ledger import Ledger

EXAMPLES = str(Path(__file__).resolve().parents[2] / "examples")
START_TIMEOUT_S = 30.0
RUN_TIMEOUT_S = 30.0

pytestmark = pytest.mark.timeout(120)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _environment(url: str) -> dict[str, str]:
    return {**os.environ, "JOBLEDGER_DB": url}


@contextmanager
def _running(argv: list[str], url: str) -> Iterator[subprocess.Popen[bytes]]:
    process = subprocess.Popen(
        argv,
        cwd=EXAMPLES,
        env=_environment(url),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        yield process
    finally:
        process.terminate()  # SIGTERM: uvicorn and the worker both shut down gracefully
        process.wait(timeout=30)


@contextmanager
def _shop(url: str) -> Iterator[httpx.Client]:
    """The app under uvicorn on a free port, answering."""
    port = _free_port()
    argv = [sys.executable, "-m", "uvicorn", "fastapi_shop:create_app", "--factory"]
    with (
        _running([*argv, "--port", str(port)], url) as server,
        httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=RUN_TIMEOUT_S + 5) as client,
    ):
        for _ in range(int(START_TIMEOUT_S / 0.05)):
            assert server.poll() is None, f"uvicorn exited with {server.returncode}"
            try:
                client.get("/openapi.json", timeout=1.0)
                break
            except httpx.TransportError:
                try:
                    server.wait(timeout=0.05)
                except subprocess.TimeoutExpired:
                    continue
        else:
            raise AssertionError("the app did not come up")
        yield client


def _worker(url: str) -> list[str]:
    jobledger = os.path.join(os.path.dirname(sys.executable), "jobledger")
    return [jobledger, "--db", url, "worker", "--app", "fastapi_shop:registry", "--poll", "0.05"]


def _orders(url: str) -> list[tuple[int, int]]:
    if url.startswith("postgresql://"):
        with psycopg.connect(url) as connection:
            rows = connection.execute("SELECT id, total FROM orders ORDER BY id").fetchall()
    else:
        with closing(sqlite3.connect(url.removeprefix("sqlite:///"))) as connection:
            rows = connection.execute("SELECT id, total FROM orders ORDER BY id").fetchall()
    return [(int(row[0]), int(row[1])) for row in rows]


def _assert_consistent(url: str) -> None:
    with Ledger.open(url) as ledger:
        assert ledger.projections().verify().clean
        assert [f for replay in ledger.replay_check_all() for f in replay.findings] == []


@pytest.mark.parametrize(
    "url_fixture", ["sqlite_url", pytest.param("pg_url", marks=pytest.mark.postgres)]
)
def test_an_order_commits_with_its_job_and_the_worker_ships_it(
    url_fixture: str, request: pytest.FixtureRequest
) -> None:
    """A POST commits the order row and its job together; the worker beside the app runs the
    job, and GET /jobs/{id}?wait reports it succeeded with its output."""
    url = str(request.getfixturevalue(url_fixture))
    with _shop(url) as shop:
        placed = shop.post("/orders", json={"total": 1200})
        assert placed.status_code == 201, placed.text
        order_id, job_id = placed.json()["order_id"], placed.json()["job_id"]
        assert _orders(url) == [(order_id, 1200)]
        assert shop.get(f"/jobs/{job_id}").json()["status"] == "pending"  # no worker yet

        with _running(_worker(url), url):
            ended = shop.get(f"/jobs/{job_id}", params={"wait": RUN_TIMEOUT_S}).json()
        assert ended == {
            "job_id": job_id,
            "status": "succeeded",
            "output": {"order_id": order_id, "parcel": f"parcel-{order_id}"},
        }
    _assert_consistent(url)


@pytest.mark.parametrize(
    "url_fixture", ["sqlite_url", pytest.param("pg_url", marks=pytest.mark.postgres)]
)
def test_a_request_that_fails_after_the_enqueue_leaves_no_order_and_no_job(
    url_fixture: str, request: pytest.FixtureRequest
) -> None:
    """The endpoint raises after enqueueing (503): its transaction rolls back, and neither the
    order nor the job nor any event of it exists; the next order still goes through."""
    url = str(request.getfixturevalue(url_fixture))
    with Ledger.open(url) as ledger:
        head = ledger.store.head_position()
    with _shop(url) as shop:
        failed = shop.post("/orders", json={"total": 900, "fail_after_enqueue": True})
        assert failed.status_code == 503, failed.text
        assert _orders(url) == []
        with Ledger.open(url) as ledger:
            assert ledger.store.head_position() == head  # not one event appended
            assert ledger.counts() == {}

        placed = shop.post("/orders", json={"total": 1500})
        assert placed.status_code == 201, placed.text
        assert [total for _, total in _orders(url)] == [1500]
        assert shop.get(f"/jobs/{uuid.uuid4()}").status_code == 404
    _assert_consistent(url)


def test_the_transactions_page_shows_the_endpoint_as_the_example_has_it() -> None:
    """docs/transactions.md's FastAPI excerpt is the example's endpoint, line for line."""
    page = (Path(EXAMPLES).parent / "docs" / "transactions.md").read_text(encoding="utf-8")
    section = page.split("## In a FastAPI app", 1)[1]
    excerpt = section.split("```py\n", 1)[1].split("```", 1)[0]
    source = (Path(EXAMPLES) / "fastapi_shop.py").read_text(encoding="utf-8")
    assert textwrap.indent(excerpt, "    ") in source
