"""``jobledger diagnose`` finds a hung worker (defect 9 of issue 12), on both backends.

The histories are recorded with a fake clock set in the past (the command itself reads the
system clock): nothing sleeps and no row is edited.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from uuid import UUID

from click.testing import CliRunner

from jobledger_cli.main import cli
from ledger import FakeClock, Ledger

PAST = datetime(2020, 1, 1, tzinfo=UTC)
HUNG_S = 660.0
"""How long the hung worker stayed silent: eleven minutes, as in the issue."""


def _diagnose(url: str, job_id: UUID) -> dict[str, dict[str, object]]:
    result = CliRunner().invoke(cli, ["--db", url, "diagnose", str(job_id), "--json"])
    assert result.exit_code == 0, result.stderr
    return {finding["name"]: finding for finding in json.loads(result.stdout)["findings"]}


def test_diagnose_reports_the_silence_a_boot_reap_ended_after_a_quick_rerun(db_url: str) -> None:
    """A claim silent for 660 s until a restarted pool's boot reap released it, then re-run
    and done in 0.13 s: the longest heartbeat gap is 660 s, citing the claim and the release
    (it was 0.13 s: only the last execution was measured)."""
    clock = FakeClock(start=PAST)
    with Ledger.open(db_url, clock=clock) as ledger:
        ledger.define("resize")
        job_id = ledger.enqueue("resize", {"image": "cat.png"}).job_id
        assert job_id is not None
        ledger.claim("default@host-a:100", lease_s=30)
        clock.advance(HUNG_S)
        ledger.release_claims_with_prefix("default@host-a:", alive=lambda _: False)
        [rerun] = ledger.claim("default@host-a:200", lease_s=30)
        assert rerun.lease is not None and rerun.attempt == 1
        clock.advance(0.13)
        ledger.succeed(rerun.lease)

    gap = _diagnose(db_url, job_id)["longest_heartbeat_gap_s"]

    assert gap["value"] == HUNG_S
    assert [(e["version"], e["event"]) for e in gap["evidence"]] == [  # type: ignore[union-attr]
        (2, "job_leased"),
        (3, "job_released"),
    ]
    assert "run 1 attempt 1, ended by job_released" in str(gap["explanation"])


def test_diagnose_reports_a_live_silent_lease_up_to_now(db_url: str) -> None:
    """A lease claimed in 2020 and never renewed nor reaped: the gap runs to the command's
    now (years), citing only the claim."""
    clock = FakeClock(start=PAST)
    with Ledger.open(db_url, clock=clock) as ledger:
        ledger.define("resize")
        job_id = ledger.enqueue("resize").job_id
        assert job_id is not None
        ledger.claim("default@host-a:100", lease_s=30)

    gap = _diagnose(db_url, job_id)["longest_heartbeat_gap_s"]

    assert isinstance(gap["value"], float) and gap["value"] > 365 * 24 * 3600
    assert [e["version"] for e in gap["evidence"]] == [2]  # type: ignore[union-attr]
    assert "still leased" in str(gap["explanation"])
