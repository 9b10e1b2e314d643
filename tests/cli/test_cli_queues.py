"""Queues from the command line: `worker --queues` claims only those, `jobs --queue` lists them."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path

from cli_helpers import invoke

from ledger import EnqueueRequest, JobStatus, Ledger

JOBLEDGER = str(Path(sys.executable).with_name("jobledger"))

APP = textwrap.dedent(
    """
    from ledger.runtime.handlers import Registry

    registry = Registry()

    @registry.handler("q.work")
    async def work(ctx):
        return {"queue": ctx.payload["queue"]}
    """
)


def enqueue_in_queues(url: str) -> dict[str | None, list[str]]:
    """Two jobs in each of the queues a and b and two without a queue; their ids by queue."""
    with Ledger.open(url) as ledger:
        ledger.define("q.work")
        by_queue: dict[str | None, list[str]] = {}
        for queue in ("a", "b", None):
            requests = [
                EnqueueRequest(job_type="q.work", payload={"queue": queue}, queue=queue)
                for _ in range(2)
            ]
            by_queue[queue] = [
                str(job_id) for job_id in [e.job_id for e in ledger.enqueue_many(requests)]
            ]
    return by_queue


def test_a_worker_process_with_queues_a_claims_only_as_jobs(db_url: str, tmp_path: Path) -> None:
    """A real `jobledger worker --queues a --burst` works a's jobs and leaves the others pending."""
    by_queue = enqueue_in_queues(db_url)
    name = f"jl_queues_app_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{name}.py").write_text(APP)
    argv = [JOBLEDGER, "--db", db_url, "worker", "--app", f"{name}:registry", "--burst"]
    done = subprocess.run(
        [*argv, "--queues", "a", "--json"],
        check=False,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["succeeded"] == 2
    assert "in queues a " in done.stderr
    with Ledger.open(db_url) as ledger:
        states = {
            str(s.job_id): s
            for s in (ledger.get(uuid.UUID(i)) for ids in by_queue.values() for i in ids)
            if s
        }
    assert {states[i].status for i in by_queue["a"]} == {JobStatus.SUCCEEDED}
    assert {states[i].status for i in by_queue["b"] + by_queue[None]} == {JobStatus.PENDING}
    with Ledger.open(db_url) as ledger:
        assert ledger.projections().verify().clean


def test_jobs_queue_filters_the_listing_now_and_at_a_time(db_url: str) -> None:
    """`jobs --queue b` lists only b's jobs; `--queue default` the ones enqueued without a
    queue; the same with --at (the queue as it was)."""
    by_queue = enqueue_in_queues(db_url)
    for queue, wanted in (("b", by_queue["b"]), ("default", by_queue[None])):
        for extra in ((), ("--at", "2999-01-01")):
            result = invoke(db_url, "jobs", "--queue", queue, "--json", *extra)
            assert result.exit_code == 0, result.stderr
            listed = [job["job_id"] for job in json.loads(result.stdout)["jobs"]]
            assert sorted(listed) == sorted(wanted), (queue, extra)
    result = invoke(db_url, "jobs", "--queue", "nowhere")
    assert result.exit_code == 0
    assert result.stdout.splitlines()[1:] == []
