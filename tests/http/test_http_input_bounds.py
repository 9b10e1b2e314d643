"""Bad input over HTTP meets the same bounds as from the CLI and the API: a body whose
object names a key twice, a sync subject past ``MAX_SUBJECT_BYTES`` — 422
``request.invalid`` in the documented error shape, nothing appended."""

from __future__ import annotations

import json

from ledger.api.ledger import Ledger
from ledger.core.limits import MAX_SUBJECT_BYTES
from tests.http.conftest import Server


def _head(ledger: Ledger) -> int:
    with ledger.store.read_snapshot() as tables:
        return tables.head()


def test_a_body_with_a_repeated_key_is_422_naming_it(defined: Ledger, server: Server) -> None:
    """``{"type": "t", "payload": {"a": 1, "a": 2}}`` on both enqueue routes: 422, the key
    named; the same body without the repeat is 201."""
    before = _head(defined)
    for path, body in (
        ("/api/v1/jobs", '{"type": "t", "payload": {"a": 1, "a": 2}}'),
        ("/api/v1/jobs", '{"type": "t", "type": "t"}'),
        ("/api/v1/jobs/batch", '{"jobs": [{"type": "t", "payload": {"a": 1, "a": 2}}]}'),
    ):
        response = server.client.post(
            path, content=body, headers={"Content-Type": "application/json"}
        )
        assert response.status_code == 422, response.text
        error = response.json()["error"]
        assert error["code"] == "request.invalid"
        assert "twice in one object" in error["message"]
    assert _head(defined) == before
    ok = server.client.post(
        "/api/v1/jobs", content=json.dumps({"type": "t", "payload": {"a": 1, "b": {"a": 2}}})
    )
    assert ok.status_code == 201, ok.text


def test_a_subject_past_the_bound_is_422(defined: Ledger, server: Server) -> None:
    """A URI or revision one byte over the bound: 422 request.invalid, nothing appended."""
    before = _head(defined)
    for subject in (
        {"source_id": "s", "uri": "u" * (MAX_SUBJECT_BYTES + 1)},
        {"source_id": "s", "uri": "u", "revision": "r" * (MAX_SUBJECT_BYTES + 1)},
    ):
        response = server.client.post("/api/v1/jobs", json={"type": "t", "subject": subject})
        assert response.status_code == 422, response.text
        assert response.json()["error"]["code"] == "request.invalid"
        assert "the limit is" in response.json()["error"]["message"]
    assert _head(defined) == before
