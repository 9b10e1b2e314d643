"""A feature namespace taken from ``ledger.using(conn)`` works in the application's
transaction, as the ledger's own commands do."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from ledger import Ledger

sys.path.insert(0, str(Path(__file__).parent.parent / "transactions"))
from app_connections import AppConnection


@pytest.fixture
def app(db_url: str, defined: Ledger) -> Iterator[AppConnection]:
    """The application's connection to the ledger's database (job type 't' defined)."""
    opened = AppConnection(db_url)
    yield opened
    opened.close()


def _request(key: str) -> dict[str, object]:
    step = {"kind": "job", "key": "a", "job_type": "t", "payload": {}, "depends_on": []}
    return {"workflow_type": "tx", "steps": [step], "idempotency_key": key}


def test_a_workflow_submitted_in_a_rolled_back_transaction_never_was(
    defined: Ledger, app: AppConnection
) -> None:
    """``using(conn).workflows.submit``: rolled back, no run and no step job; committed, both."""
    head = defined.store.head_position()
    app.begin()
    lost = defined.using(app.conn).workflows.submit(_request("lost")).run_id
    app.rollback()
    assert defined.store.head_position() == head
    assert defined.workflows.run(lost) is None and defined.claim("w") == []
    app.begin()
    kept = defined.using(app.conn).workflows.submit(_request("kept")).run_id
    assert defined.workflows.run(kept) is None  # not before the commit, to anyone else
    app.commit()
    assert defined.workflows.run(kept) is not None
    assert [job.job_type for job in defined.claim("w")] == ["t"]


def test_a_queue_paused_in_the_applications_transaction_commits_with_it(
    defined: Ledger, app: AppConnection
) -> None:
    """``using(conn).limits.pause_queue`` is written on the application's connection."""
    app.begin()
    defined.using(app.conn).limits.pause_queue("emails")
    app.rollback()
    assert defined.limits.queues() == []
    app.begin()
    defined.using(app.conn).limits.pause_queue("emails")
    app.commit()
    assert [(q.queue, q.paused) for q in defined.limits.queues()] == [("emails", True)]
