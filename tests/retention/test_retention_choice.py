"""Which jobs a retention run would move, on both backends: finished plain jobs past their
rule only; live jobs, workflow steps' jobs and sync subjects' jobs stay (decision 31)."""

from __future__ import annotations

from retention_helpers import PAST

from ledger import FakeClock, Ledger
from ledger.jobs.outcomes import Completion
from ledger.retention.retention_runs import choose, policy_of, set_rule

STEP = {"kind": "job", "key": "root", "job_type": "t", "payload": {}, "depends_on": []}


def test_only_finished_plain_jobs_past_their_rule_are_chosen(db_url: str) -> None:
    """Of a succeeded plain job, a succeeded sync job, a succeeded workflow step's job, a
    leased and a pending job, all old, only the plain one may move; a younger finished job
    waits for its rule."""
    clock = FakeClock(PAST)
    with Ledger.open(db_url, clock=clock) as ledger:
        ledger.define("t")
        plain = ledger.enqueue("t", {"kind": "plain"}).job_id
        [synced] = ledger.sources.sync("src", [("file:///a", "r1")], job_type="t").enqueued
        ledger.workflows.submit({"workflow_type": "w", "steps": [STEP], "result_step": None})
        claimed = ledger.claim("w1", limit=10)
        assert len(claimed) == 3
        result = ledger.succeed_many([Completion(s.lease) for s in claimed if s.lease])
        assert not result.rejected
        leased_job = ledger.enqueue("t", {"kind": "leased"}).job_id
        ledger.claim("w1", limit=1)
        clock.advance(10 * 86_400)
        young = ledger.enqueue("t", {"kind": "young"}).job_id
        [young_claim] = ledger.claim("w1", limit=5)
        assert young_claim.job_id == young and young_claim.lease is not None
        ledger.succeed(young_claim.lease)
        ledger.enqueue("t", {"kind": "pending"})  # also the newest event: none chosen holds it
        ledger.catch_up()
        set_rule(ledger.store, clock.now(), job_type=None, status=None, after_s=86_400)
        ledger.catch_up()
        clock.advance(3_600)

        choice = choose(ledger.store, policy_of(ledger.store), clock.now())

        assert [job.job_id for job in choice.eligible] == [plain]
        assert choice.held == []
        assert plain not in {synced, leased_job}
