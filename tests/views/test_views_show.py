"""``jobledger show``: state, lease, attempts, last error, next retry and diagnostics."""

from __future__ import annotations

import json
from uuid import UUID

import msgspec
from views_helpers import RETRYABLE, TERMINAL, define_types, enqueue, invoke

from ledger import FakeClock, Ledger
from ledger.api.shaping import job_details_json, record_json
from ledger.core.diagnostics import diagnose


def _labelled(text: str) -> dict[str, str]:
    """show's ``label  value`` lines as a dict (continuation lines, unlabelled, are joined)."""
    lines = text.splitlines()
    column = lines[0].index(lines[0].split()[-1])
    found: dict[str, str] = {}
    label = ""
    for line in lines:
        assert line[column - 2 : column] == "  ", line
        label = line[:column].strip() or label
        found[label] = (found[label] + "\n" if line[:column].strip() == "" else "") + line[column:]
    return found


def _show(url: str, job_id: UUID) -> tuple[dict[str, str], dict[str, object]]:
    text = invoke(url, "show", str(job_id))
    assert text.exit_code == 0, text.stderr
    shown = invoke(url, "show", str(job_id), "--json")
    assert shown.exit_code == 0, shown.stderr
    return _labelled(text.stdout), json.loads(shown.stdout)


def test_show_a_retried_job_names_its_error_and_next_retry(db_url: str, clock: FakeClock) -> None:
    """A job waiting out its backoff shows the failure, the retry count and when it is due."""
    with Ledger.open(db_url, clock=clock) as ledger:
        define_types(ledger)
        job_id = enqueue(ledger)
        [state] = ledger.claim("w1")
        assert state.lease is not None
        retried = ledger.fail(state.lease, RETRYABLE)
    lines, shown = _show(db_url, job_id)
    assert lines["status"] == "pending (stage queued)"
    assert lines["attempts"] == "1 of 3"
    assert lines["last error"] == "retryable: smtp.busy: 421 busy"
    assert lines["next retry"] == lines["run at"] != "-"
    assert "retries: 1 (1 retry," in lines["diagnostics"]
    assert lines["diagnostics"].endswith(f"details: jobledger diagnose {job_id}")
    assert shown["next_retry_at"] == retried.run_at.isoformat().replace("+00:00", "Z")
    assert shown["last_error"] == {"kind": "retryable", "code": "smtp.busy", "message": "421 busy"}
    findings = {f["name"]: f for f in shown["diagnostics"]}  # type: ignore[attr-defined]
    assert findings["retries"]["value"] == 1 and findings["retries"]["evidence"] == [4]


def test_show_a_leased_job_names_its_lease(db_url: str, clock: FakeClock) -> None:
    """A leased job shows worker, lease end, renewals this attempt and the last heartbeat."""
    with Ledger.open(db_url, clock=clock) as ledger:
        define_types(ledger)
        job_id = enqueue(ledger)
        [state] = ledger.claim("w7", lease_s=30)
        assert state.lease is not None
        clock.advance(10)
        ledger.heartbeat(state.lease, lease_s=30)
        clock.advance(10)
        renewed = ledger.heartbeat(state.lease, lease_s=30)
    lines, shown = _show(db_url, job_id)
    assert lines["status"].startswith("leased")
    assert (lines["worker"], lines["attempts"]) == ("w7", "1 of 3")
    assert renewed.lease_expires_at is not None
    assert lines["lease expires"] == renewed.lease_expires_at.isoformat(
        timespec="milliseconds"
    ).replace("+00:00", "Z")
    assert lines["lease renewals"] == "2"
    assert lines["last heartbeat"] == lines["updated"].split()[0]
    assert lines["next retry"] == "-"
    assert (shown["lease_renewals"], shown["worker_id"], shown["next_retry_at"]) == (2, "w7", None)


def test_show_a_dead_job(db_url: str, clock: FakeClock) -> None:
    """A dead job shows its terminal error, no lease and no retry; --json keeps every field."""
    with Ledger.open(db_url, clock=clock) as ledger:
        define_types(ledger)
        job_id = enqueue(ledger, payload={"invoice": 17})
        [state] = ledger.claim("w1")
        assert state.lease is not None
        ledger.fail(state.lease, TERMINAL)
        dead = ledger.get(job_id)
    assert dead is not None
    lines, shown = _show(db_url, job_id)
    assert lines["status"] == "dead (stage claimed)"
    assert lines["last error"] == "terminal: input.bad: no total"
    assert (lines["lease expires"], lines["next retry"]) == ("-", "-")
    assert "leases_lost: 0" in lines["diagnostics"]
    assert shown["status"] == "dead" and shown["payload"] == {"invoice": 17}
    assert shown["finished_at"] == dead.finished_at.isoformat().replace("+00:00", "Z")  # type: ignore[union-attr]
    assert {"lease_renewals", "next_retry_at", "diagnostics", "retries", "backoff"} <= set(shown)


def test_show_and_history_json_are_the_shared_shapes(db_url: str, clock: FakeClock) -> None:
    """``show --json`` and ``history --json`` print exactly ``ledger.api.shaping``'s shapes of
    the ledger's own reads, so another front end using the module prints the same JSON."""
    with Ledger.open(db_url, clock=clock) as ledger:
        define_types(ledger)
        job_id = enqueue(ledger, org="acme", payload={"n": 1})
        [state] = ledger.claim("w1")
        assert state.lease is not None
        ledger.heartbeat(state.lease)
        clock.advance(5)
        ledger.fail(state.lease, RETRYABLE)
        records = ledger.history(job_id)
        current = ledger.get(job_id)
        assert current is not None
        # Pending, so no live lease: the findings do not depend on whose clock reads them.
        findings = diagnose(records, now=clock.now())
    _, shown = _show(db_url, job_id)
    # Pending and of a type without limits: nothing holds it back.
    assert shown == as_json(job_details_json(current, records, findings, blockers=[]))
    assert shown["blocked_by"] == []
    history = invoke(db_url, "history", str(job_id), "--json")
    assert history.exit_code == 0, history.stderr
    assert json.loads(history.stdout) == as_json([record_json(record) for record in records])


def as_json(value: object) -> object:
    """``value`` through a JSON encoder, as the CLI's output is read back."""
    return json.loads(msgspec.json.encode(value))
