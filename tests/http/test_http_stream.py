"""The live event stream (GET /api/v1/events/stream) against a real server, both backends.

Every test orders its steps: it connects, reads the ``: connected`` comment the server sends
once the stream is subscribed, and only then appends; reads end on a timeout, never a sleep."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families

from ledger.api.ledger import Ledger
from ledger.core.state import JobState, Lease
from ledger.core.values import Failure, FailureKind
from tests.http.conftest import Server

PATH = "/api/v1/events/stream"
READ_TIMEOUT_S = 15.0


@dataclass
class Message:
    id: int
    event: str
    data: dict[str, Any]


class Stream:
    """An open stream's lines, parsed into comments and messages."""

    def __init__(self, response: httpx.Response) -> None:
        self.response = response
        self._lines = response.iter_lines()

    def comment(self) -> str:
        """The next comment (skipping nothing: it must come first)."""
        line = next(self._lines)
        assert line.startswith(": "), line
        next(self._lines)  # the blank line ending it
        return line[2:]

    def rest(self) -> list[str]:
        """Every line left, until the server ends the stream."""
        return list(self._lines)

    def next_message(self) -> Message:
        """The next message, skipping keep-alive comments."""
        fields: dict[str, str] = {}
        for line in self._lines:
            if line == "":
                if fields:
                    return Message(int(fields["id"]), fields["event"], json.loads(fields["data"]))
                continue
            if line.startswith(":"):
                continue
            name, _, value = line.partition(": ")
            fields[name] = value
        raise AssertionError("the stream ended")


@contextmanager
def connected(
    server: Server, params: dict[str, Any] | None = None, headers: dict[str, str] | None = None
) -> Iterator[Stream]:
    """An open stream, subscribed (its ``: connected`` comment read)."""
    with server.client.stream(
        "GET",
        PATH,
        params=params,
        headers={"Accept": "text/event-stream", **(headers or {})},
        timeout=httpx.Timeout(READ_TIMEOUT_S),
    ) as response:
        assert response.status_code == 200, response.read()
        assert response.headers["content-type"].startswith("text/event-stream")
        stream = Stream(response)
        assert stream.comment() == "connected"
        yield stream


def lease(job: JobState) -> Lease:
    assert job.worker_id is not None
    return Lease(job.job_id, job.run_number, job.attempt, job.worker_id)


def test_a_filtered_stream_gets_only_new_matching_events(defined: Ledger, server: Server) -> None:
    """Connected with type and event filters, a client receives the matching events appended
    after it connected, with the job's status after each, and none of the others."""
    defined.define("u")
    defined.enqueue("t", {"before": True}, org="acme")  # before connecting: not sent
    params = {"type": "t", "event": ["job_enqueued", "job_leased", "job_succeeded"]}
    with connected(server, params) as stream:
        defined.enqueue("u", {}, org="acme")
        job_id = defined.enqueue("t", {"n": 1}, org="acme").job_id
        enqueued = stream.next_message()
        assert enqueued.event == "job_enqueued"
        assert enqueued.id == enqueued.data["position"]
        assert enqueued.data == {
            "position": enqueued.id,
            "event": "job_enqueued",
            "at": enqueued.data["at"],
            "job_id": str(job_id),
            "workflow_run_id": None,
            "job_type": "t",
            "org": "acme",
            "status": "pending",
        }
        [job] = defined.claim("w1", types=["t"])  # the older "t" job is claimed first
        defined.succeed(lease(job))
        leased, succeeded = stream.next_message(), stream.next_message()
        assert leased.data["job_id"] == succeeded.data["job_id"] == str(job.job_id)
        assert (leased.event, leased.data["status"]) == ("job_leased", "leased")
        assert (succeeded.event, succeeded.data["status"]) == ("job_succeeded", "succeeded")
        assert enqueued.id < leased.id < succeeded.id


def test_job_and_org_filters_hold_the_stream_to_them(defined: Ledger, server: Server) -> None:
    """``job=`` sends only that job's events; ``org=`` only that org's."""
    first = defined.enqueue("t", {}, org="acme").job_id
    with (
        connected(server, {"job": str(first)}) as by_job,
        connected(server, {"org": "globex"}) as by_org,
    ):
        other = defined.enqueue("t", {}, org="globex").job_id
        defined.cancel(first, reason="test")
        cancelled = by_job.next_message()
        assert (cancelled.event, cancelled.data["job_id"]) == ("job_cancelled", str(first))
        assert cancelled.data["status"] == "cancelled"
        enqueued = by_org.next_message()
        assert (enqueued.data["job_id"], enqueued.data["org"]) == (str(other), "globex")
        defined.cancel(other, reason="test")
        assert by_org.next_message().event == "job_cancelled"


def test_last_event_id_and_after_resume_after_that_position(
    defined: Ledger, server: Server
) -> None:
    """A stream opened with ``Last-Event-ID`` (or ``after=``) sends what followed that
    position, then goes on live; ``after=0`` starts at the log's beginning."""
    jobs = [defined.enqueue("t", {"n": n}).job_id for n in range(3)]
    with connected(server, {"after": 0, "event": "job_enqueued"}) as from_start:
        seen = [from_start.next_message() for _ in jobs]
    assert [m.data["job_id"] for m in seen] == [str(j) for j in jobs]
    resumed_from = str(seen[0].id)
    with connected(server, {"event": "job_enqueued"}, {"Last-Event-ID": resumed_from}) as stream:
        assert [stream.next_message().data["job_id"] for _ in range(2)] == [
            str(j) for j in jobs[1:]
        ]
        live = defined.enqueue("t", {"n": 3}).job_id
        assert stream.next_message().data["job_id"] == str(live)
    with connected(server, {"after": seen[1].id, "event": "job_enqueued"}) as stream:
        assert stream.next_message().data["job_id"] == str(jobs[2])


def test_resuming_after_a_position_with_no_event_is_404(server: Server) -> None:
    """A ``Last-Event-ID`` naming no event is 404 (not a stream that silently starts
    elsewhere); one that is not a number is 422, as every invalid request."""
    response = server.client.get(PATH, headers={"Last-Event-ID": "999999"})
    assert response.status_code == 404
    assert server.client.get(PATH, headers={"Last-Event-ID": "x"}).status_code == 422


def test_an_org_token_sees_only_its_orgs_events(defined: Ledger, server: Server) -> None:
    """An org token's stream holds none of another org's events nor those of no org (a job
    type defined, a token created, a job of no org); asking for another org is 404, and no
    token is 401."""
    acme = server.token("read", "acme")
    assert (
        server.client.get(PATH, params={"org": "globex"}, headers=server.as_token(acme)).status_code
        == 404
    )
    assert server.client.get(PATH, headers=server.as_token(None)).status_code == 401
    with connected(server, headers=server.as_token(acme)) as stream:
        defined.enqueue("t", {}, org="globex")
        defined.define("v")
        defined.enqueue("t", {})
        server.token("admin", None)
        mine = defined.enqueue("t", {}, org="acme").job_id
        message = stream.next_message()
        assert (message.data["job_id"], message.data["org"]) == (str(mine), "acme")
    with connected(server, {"org": "acme"}, server.as_token(acme)) as stream:
        defined.enqueue("t", {}, org="globex")
        mine = defined.enqueue("t", {}, org="acme").job_id
        assert stream.next_message().data["job_id"] == str(mine)


def test_stopping_the_server_ends_open_streams(defined: Ledger, server: Server) -> None:
    """An open stream does not hold the server's shutdown: it stops at once, ending the
    stream."""
    del defined
    with connected(server) as stream:
        server.process.terminate()
        server.process.wait(timeout=5)  # uvicorn re-raises the SIGTERM once it has stopped
        assert all(line == "" or line.startswith(":") for line in stream.rest())


def test_a_failed_attempt_streams_retry_and_death(defined: Ledger, server: Server) -> None:
    """A failure at the last attempt streams as job_failed (still leased) then
    job_dead_lettered (dead)."""
    job_id = defined.enqueue("t", {}, max_attempts=1).job_id
    with connected(server, {"job": str(job_id)}) as stream:
        [job] = defined.claim("w1")
        defined.fail(lease(job), Failure(kind=FailureKind.RETRYABLE, code="boom", message="boom"))
        messages = [stream.next_message() for _ in range(3)]
    assert [(m.event, m.data["status"]) for m in messages] == [
        ("job_leased", "leased"),
        ("job_failed", "leased"),
        ("job_dead_lettered", "dead"),
    ]


def test_a_workflows_events_and_its_steps_carry_its_run_and_org(
    defined: Ledger, server: Server
) -> None:
    """``workflow=`` sends the run's own events and its step jobs' (each naming the run and
    its org); another run's are left out, and an org token of another org sees none."""
    defined.define("work")
    step = {"kind": "job", "key": "a", "job_type": "work"}
    globex = server.token("read", "globex")
    with connected(server, headers=server.as_token(globex)) as theirs:
        defined.workflows.submit({"workflow_type": "wf", "org": "acme", "steps": [step]})
        run = defined.workflows.submit({"workflow_type": "wf", "org": "globex", "steps": [step]})
        first = theirs.next_message()
        assert (first.data["workflow_run_id"], first.data["org"]) == (str(run.run_id), "globex")
    with connected(server, {"after": 0, "workflow": str(run.run_id)}) as stream:
        messages = [stream.next_message() for _ in range(3)]
    assert {m.data["workflow_run_id"] for m in messages} == {str(run.run_id)}
    assert {m.data["org"] for m in messages} == {"globex"}
    assert [m.event for m in messages][:1] == ["workflow_submitted"]
    assert "job_enqueued" in [m.event for m in messages]


def open_streams(server: Server) -> float:
    families = text_string_to_metric_families(server.client.get("/metrics").text)
    [family] = [f for f in families if f.name == "jobledger_event_streams_open"]
    return float(family.samples[0].value)


def test_a_disconnected_client_is_dropped(defined: Ledger, server: Server) -> None:
    """A client that goes away is no longer a subscriber: the server's
    ``jobledger_event_streams_open`` falls back."""
    del defined
    with connected(server):
        with connected(server):
            assert open_streams(server) == 2
        deadline = time.monotonic() + 30
        while open_streams(server) != 1:
            assert time.monotonic() < deadline, "the closed stream was never dropped"
            time.sleep(0.05)  # polling a real process: real time
    while open_streams(server) != 0:
        assert time.monotonic() < deadline, "the closed stream was never dropped"
        time.sleep(0.05)
