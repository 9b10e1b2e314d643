"""``POST /api/v1/jobs`` takes every run_at the ledger can export and import, and refuses the
rest with the documented 422, on both backends."""

from __future__ import annotations

from datetime import UTC, datetime
from uuid import UUID

from ledger.api.ledger import Ledger
from tests.http.conftest import Server


def test_run_at_across_the_accepted_range_over_http(defined: Ledger, server: Server) -> None:
    """A run_at in the year 999 is 201 and stored as sent; one whose UTC instant is before
    the year 1 (0001-01-01T00:00+01:00) is 422 request.invalid, not a 500, nothing appended."""
    early = server.client.post("/api/v1/jobs", json={"type": "t", "run_at": "0999-06-01T00:00:00Z"})
    assert early.status_code == 201, early.text
    job = defined.get(UUID(early.json()["job"]["job_id"]))
    assert job is not None and job.run_at == datetime(999, 6, 1, tzinfo=UTC)
    before = defined.store.head_position()
    body = {"type": "t", "run_at": "0001-01-01T00:00:00+01:00"}
    refused = server.client.post("/api/v1/jobs", json=body)
    assert refused.status_code == 422, refused.text
    assert refused.json()["error"]["code"] == "request.invalid"
    assert "outside the years 1 to 9999" in refused.json()["error"]["message"]
    assert defined.store.head_position() == before
