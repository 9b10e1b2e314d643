"""A scheduler process for the multi-process schedule tests: a ledger whose clock is read
from a file the test advances, and one scheduler pass per ``go`` line on stdin.

Usage: ``python scheduler_process.py URL CLOCK_FILE``. It prints ``ready`` once the ledger
is open; then, per ``go`` line, runs :meth:`Scheduler.run_once
<ledger.maintenance.scheduler.Scheduler.run_once>` at the file's time and prints one JSON
line (slots fired and missed, whether it lost the race to another process); ``quit`` ends it.
The test's step is the barrier: it writes the time, sends ``go`` to every process, and waits
for every answer before the next step.
"""

from __future__ import annotations

import json
import sys
from datetime import datetime
from pathlib import Path

from ledger.api.ledger import Ledger
from ledger.maintenance.scheduler import Scheduler


class FileClock:
    """A clock that reads the time the test wrote (ISO 8601) on every call."""

    def __init__(self, path: Path) -> None:
        self._path = path

    def now(self) -> datetime:
        return datetime.fromisoformat(self._path.read_text(encoding="utf-8").strip())


def main(url: str, clock_file: str) -> int:
    with Ledger.open(url, clock=FileClock(Path(clock_file)), pool_size=2) as ledger:
        scheduler = Scheduler(ledger)
        print("ready", flush=True)
        for line in sys.stdin:
            if line.strip() == "quit":
                break
            reports = scheduler.run_once()
            answer = {
                "fired": [[f.schedule, f.slot.isoformat()] for r in reports for f in r.fired],
                "missed": sum(m.count for r in reports for m in r.missed),
                "contended": any(r.contended or r.conflict for r in reports),
            }
            print(json.dumps(answer), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
