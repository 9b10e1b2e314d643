"""``/api/v1/sources`` and ``/sources/{source}`` with each source's last poll and breaker
(the same shape as ``jobledger sources --json``); an org-scoped token sees the polls only of
the sources it sees."""

from __future__ import annotations

from ledger.api.ledger import Ledger
from ledger.core.source_diff import Listing
from ledger.core.source_polls.decide import BreakerPolicy, SourceConfig
from tests.http.conftest import Server


def _down() -> Listing:
    raise TimeoutError("bucket listing timed out")


def test_sources_carry_the_last_poll_and_breaker(defined: Ledger, server: Server) -> None:
    """A source polled fine and one whose breaker opened: both in /sources with ``poll``;
    /sources/{name} has it too, with the rows; an org's token sees neither poll-only one."""
    defined.sources.poll("docs", lambda: [("a", "r1")], SourceConfig(job_type="t", org="acme"))
    failing = SourceConfig(job_type="t", breaker=BreakerPolicy(1, 60))
    defined.sources.poll("bucket", _down, failing)
    listed = server.client.get("/api/v1/sources").json()
    assert [(s["source_id"], s["poll"]["result"]) for s in listed] == [
        ("bucket", "failed"),
        ("docs", "polled"),
    ]
    bucket = listed[0]["poll"]
    assert (bucket["error_code"], bucket["error"], bucket["failures"]) == (
        "TimeoutError",
        "bucket listing timed out",
        1,
    )
    assert bucket["breaker_until"].startswith("2026-01-01T00:01:00")
    one = server.client.get("/api/v1/sources/docs").json()
    assert one["poll"]["counts"]["enqueued"] == 1 and one["rows"] == []
    assert one["jobs"] == {"pending": 1}
    as_acme = server.as_token(server.token("read", "acme"))
    mine = server.client.get("/api/v1/sources", headers=as_acme).json()
    assert [(s["source_id"], s["poll"]["result"]) for s in mine] == [("docs", "polled")]
    hidden = server.client.get("/api/v1/sources/bucket", headers=as_acme)
    assert hidden.status_code == 404
