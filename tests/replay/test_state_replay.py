"""State replay: ``replay JOB --to-event N`` / ``--at TIME`` and ``timeline JOB`` (both
backends), against the fold of the history's prefixes."""

from __future__ import annotations

import json
from uuid import UUID

import pytest
from replay_helpers import invoke, make_histories, prefix_state

from jobledger_cli.render import when
from jobledger_cli.timeline import LABELS
from ledger import FakeClock, Ledger
from ledger.api.shaping import state_json


@pytest.fixture
def histories(db_url: str, clock: FakeClock) -> dict[str, UUID]:
    with Ledger.open(db_url, clock=clock) as ledger:
        return make_histories(ledger, clock, db_url)


def as_json(value: object) -> object:
    """``value`` through JSON, as the CLI's ``--json`` output is read back."""
    return json.loads(json.dumps(value))


def test_replay_to_every_event_is_the_fold_of_that_prefix(
    db_url: str, histories: dict[str, UUID]
) -> None:
    """For every job and every k, ``state_at(version=k)`` is ``fold(history[:k])``; for the
    job with the richest history (retries, a dead letter, a requeue, progress) the CLI's
    ``--to-event k --json`` prints exactly that state, as ``show --json`` would."""
    with Ledger.open(db_url) as ledger:
        records = {name: ledger.history(job_id) for name, job_id in histories.items()}
        for name, job_id in histories.items():
            for k in range(1, len(records[name]) + 1):
                assert ledger.state_at(job_id, version=k) == prefix_state(records[name], k)
    flaky = records["flaky"]
    assert len(flaky) > 20
    for k in range(1, len(flaky) + 1):
        result = invoke(db_url, "replay", str(histories["flaky"]), "--to-event", str(k), "--json")
        assert result.exit_code == 0, result.output
        expected = prefix_state(flaky, k)
        assert expected is not None
        assert json.loads(result.stdout) == as_json(state_json(expected))


def test_replay_at_a_time_folds_the_events_up_to_it(
    db_url: str, histories: dict[str, UUID]
) -> None:
    """``--at T`` is the fold of every event at or before T (several events may share T);
    text output has ``show``'s layout, ending with the event it stands at."""
    job_id = histories["lost"]
    with Ledger.open(db_url) as ledger:
        records = ledger.history(job_id)
    for record in records:
        at = record.event.at
        k = max(i + 1 for i, r in enumerate(records) if r.event.at <= at)
        result = invoke(db_url, "replay", str(job_id), "--at", at.isoformat(), "--json")
        assert result.exit_code == 0, result.output
        expected = prefix_state(records, k)
        assert expected is not None
        assert json.loads(result.stdout) == as_json(state_json(expected))
    text = invoke(db_url, "replay", str(job_id), "--at", records[2].event.at.isoformat())
    assert text.exit_code == 0, text.output
    lines = text.stdout.splitlines()
    assert lines[0].split() == ["job", str(job_id)]
    assert lines[-1].split()[-2:] == ["(event", "3)"]


def test_replay_refuses_events_and_times_outside_the_history(
    db_url: str, histories: dict[str, UUID]
) -> None:
    """An event number past the end, a time before the enqueue, an unknown job: one error
    line, exit 1; a missing mode or a mode without its JOB: usage, exit 2."""
    job_id = str(histories["sync"])
    with Ledger.open(db_url) as ledger:
        records = ledger.history(histories["sync"])
    past = invoke(db_url, "replay", job_id, "--to-event", str(len(records) + 1))
    assert past.exit_code == 1
    assert past.stderr == (
        f"error: request.invalid: job {job_id} has {len(records)} events; "
        f"--to-event must be 1..{len(records)}\n"
    )
    before = invoke(db_url, "replay", job_id, "--at", "2000-01-01T00:00:00+00:00")
    assert before.exit_code == 1
    assert "did not exist yet at 2000-01-01T00:00:00.000Z" in before.stderr
    unknown = invoke(db_url, "replay", str(UUID(int=5)), "--to-event", "1")
    assert (unknown.exit_code, unknown.stderr) == (
        1,
        f"error: job.not_found: no job {UUID(int=5)}\n",
    )
    for args in ([job_id], ["--to-event", "1"], [job_id, "--to-event", "1", "--check"]):
        usage = invoke(db_url, "replay", *args)
        assert usage.exit_code == 2, (args, usage.output)
        assert usage.stderr.startswith("error: ")


def test_timeline_lists_each_event_with_the_state_change_it_caused(
    db_url: str, histories: dict[str, UUID]
) -> None:
    """One line per event (version, time, name, changed fields a→b); JSON gives each change
    as from/to, equal to the difference between consecutive folds."""
    job_id = histories["released"]
    with Ledger.open(db_url) as ledger:
        records = ledger.history(job_id)
    result = invoke(db_url, "timeline", str(job_id))
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["VERSION", "AT", "EVENT", "CHANGES"]
    assert len(lines) == 1 + len(records)
    names = [line.split()[2] for line in lines[1:]]
    assert names == [r.event.name for r in records]
    # enqueued, leased, released, leased, failed, dead-lettered
    assert "status=pending" in lines[1] and "attempt=0" in lines[1]
    assert "status pending→leased" in lines[2] and "attempt 0→1" in lines[2]
    assert "status leased→pending" in lines[3] and "attempt 1→0" in lines[3]
    assert "worker w1→-" in lines[3]
    assert lines[4].split()[:2] == ["4", when(records[3].event.at)]
    assert "error -→" in lines[5] and "bad.input" in lines[5]
    assert "status leased→dead" in lines[6] and "finished -→" in lines[6]

    data = json.loads(invoke(db_url, "timeline", str(job_id), "--json").stdout)
    assert [row["version"] for row in data] == list(range(1, len(records) + 1))
    for k in range(2, len(records) + 1):
        before, after = prefix_state(records, k - 1), prefix_state(records, k)
        assert before is not None and after is not None
        old, new = as_json(state_json(before)), as_json(state_json(after))
        assert isinstance(old, dict) and isinstance(new, dict)
        changed = {
            name: {"from": old[name], "to": new[name]} for name in LABELS if old[name] != new[name]
        }
        assert data[k - 1]["changes"] == changed
        assert data[k - 1]["changes"]  # every event here changes something visible
    assert data[2]["changes"]["status"] == {"from": "leased", "to": "pending"}
