"""Three scheduler processes over one ledger and one clock file, stepped by the test across
slots, both of Europe/Paris's DST changes and a downtime: every slot fires exactly once,
overdue slots follow each catch-up policy and are recorded missed (both backends)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from jobledger_cli.main import cli
from ledger import Ledger
from ledger.clock import FakeClock
from ledger.core.schedules.catch_up import slot_key
from ledger.core.schedules.events import ScheduleFired, ScheduleMissed
from ledger.core.schedules.state import schedule_stream_id

PROCESS = Path(__file__).with_name("scheduler_process.py")
PROCESSES = 3
PARIS = "Europe/Paris"


def utc(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


class Schedulers:
    """The scheduler processes and the clock they read; :meth:`step` is the barrier."""

    def __init__(self, url: str, clock_file: Path, clock: FakeClock) -> None:
        self.clock_file = clock_file
        self.clock = clock
        self._write_clock()
        self.processes = [
            subprocess.Popen(
                [sys.executable, str(PROCESS), url, str(clock_file)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
            )
            for _ in range(PROCESSES)
        ]
        for process in self.processes:
            assert self._line(process) == "ready"
        self.answers: list[dict[str, Any]] = []

    def _write_clock(self) -> None:
        written = self.clock_file.with_suffix(".tmp")
        written.write_text(self.clock.now().isoformat(), encoding="utf-8")
        written.replace(self.clock_file)  # atomic: a reader never sees half a time

    def _line(self, process: subprocess.Popen[str]) -> str:
        assert process.stdout is not None
        line = process.stdout.readline()
        assert line, f"scheduler process exited with {process.wait()}"
        return line.strip()

    def step(self, when: datetime) -> list[dict[str, Any]]:
        """Move the clock to ``when`` and run one pass in every process at once."""
        self.clock.set(when)
        self._write_clock()
        for process in self.processes:
            assert process.stdin is not None
            process.stdin.write("go\n")
            process.stdin.flush()
        answers = [json.loads(self._line(process)) for process in self.processes]
        self.answers.extend(answers)
        return answers

    def close(self) -> None:
        for process in self.processes:
            if process.poll() is None:
                assert process.stdin is not None
                process.stdin.write("quit\n")
                process.stdin.close()
        for process in self.processes:
            assert process.wait(timeout=30) == 0


@pytest.fixture
def schedulers(
    db_url: str, tmp_path: Path, defined: Ledger, clock: FakeClock
) -> Iterator[Schedulers]:
    clock.set(utc("2026-03-27T12:00:00"))
    running = Schedulers(db_url, tmp_path / "clock", clock)
    try:
        yield running
    finally:
        running.close()


DAILY = ["2026-03-28T01:30", "2026-03-29T01:00", "2026-03-30T00:30"]
"""``30 2 * * *`` in Paris around the spring change: 02:30 CET, then 03:00 CEST (02:30 does
not exist on 29 March; the slot fires at the transition), then 02:30 CEST."""
OVERDUE = ["2026-03-31T00:30", "2026-04-01T00:30", "2026-04-02T00:30", "2026-04-03T00:30"]
AUTUMN = ["2026-10-25T00:30", "2026-10-26T01:30"]
"""02:30 CEST, the first of the two 02:30s of 25 October (a fixed time fires once), then 02:30
CET."""
HALF_HOURS = ["2026-10-25T00:00", "2026-10-25T00:30", "2026-10-25T01:00", "2026-10-25T01:30",
              "2026-10-25T02:00"]  # fmt: skip
"""``*/30 * * * *`` in Paris through the repeated hour: 02:00, 02:30 CEST, 02:00, 02:30 CET
(other instants, so other slots), 03:00 CET."""


def test_every_slot_fires_once_across_processes_dst_and_downtime(
    db_url: str, defined: Ledger, clock: FakeClock, schedulers: Schedulers
) -> None:
    """Three processes race on each step; from the history: each expected slot fired once,
    its job keyed by it, the overdue slots fired or missed by policy; verify and replay
    --check --all hold."""
    for policy in ("all", "latest", "none"):
        defined.schedules.add(policy, "30 2 * * *", "t", tz=PARIS, catch_up=policy)
    schedulers.step(utc("2026-03-28T01:29:00"))  # nothing due yet
    for slot in DAILY:
        answers = schedulers.step(utc(slot).replace(second=5))
        assert sorted(f[0] for a in answers for f in a["fired"]) == ["all", "latest", "none"]
    schedulers.step(utc("2026-04-03T12:00:00"))  # after four days of downtime
    for policy in ("all", "latest", "none"):
        defined.schedules.pause(policy)  # the summer: neither fired nor missed
    clock.set(utc("2026-10-24T23:45:00"))
    for policy in ("all", "latest", "none"):
        defined.schedules.resume(policy)
    defined.schedules.add("half-hours", "*/30 * * * *", "t", tz=PARIS, catch_up="all")
    for slot in HALF_HOURS:
        schedulers.step(utc(slot).replace(second=5))
    defined.schedules.remove("half-hours")
    schedulers.step(utc("2026-10-26T01:30:05"))

    expected_fired = {
        "all": DAILY + OVERDUE + AUTUMN,
        "latest": [*DAILY, OVERDUE[-1], *AUTUMN],
        "none": DAILY + AUTUMN,
        "half-hours": HALF_HOURS,
    }
    expected_missed = {"all": [], "latest": OVERDUE[:-1], "none": OVERDUE, "half-hours": []}
    fired_events: list[tuple[str, ScheduleFired]] = []
    for name, slots in expected_fired.items():
        events = [r.event for r in defined.store.history(schedule_stream_id(name))]
        fired = [e for e in events if isinstance(e, ScheduleFired)]
        missed = [s for e in events if isinstance(e, ScheduleMissed) for s in e.slots]
        assert [e.slot for e in fired] == [utc(s) for s in slots], name
        assert missed == [utc(s) for s in expected_missed[name]], name
        fired_events += [(name, e) for e in fired]
    jobs = defined.get_many([e.job_id for _, e in fired_events])
    assert all(e.created for _, e in fired_events)
    assert {jobs[e.job_id].request.idempotency_key for _, e in fired_events} == {
        slot_key(name, e.slot) for name, e in fired_events
    }
    assert sum(defined.store.count_by_status().values()) == len(fired_events)  # no other job
    reported = [tuple(f) for a in schedulers.answers for f in a["fired"]]
    lost = sum(a["contended"] for a in schedulers.answers)
    assert len(reported) == len(set(reported)) == len(fired_events), lost  # none fired twice

    report = defined.projections().verify()
    assert report.clean, report
    checked = CliRunner().invoke(cli, ["--db", db_url, "replay", "--check", "--all", "--json"])
    assert checked.exit_code == 0, checked.output
    summary = json.loads(checked.stdout)
    assert summary["schedules"] == 4 and summary["findings"] == []
