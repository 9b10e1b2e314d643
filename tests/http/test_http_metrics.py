"""``GET /metrics`` on a real server, both backends: the Prometheus text parses, and its
counters equal the ledger's own counts (``stats``) after a run."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from ledger.api.ledger import Ledger
from ledger.clock import FakeClock
from ledger.core.state import JobState, Lease
from ledger.core.values import Failure, FailureKind
from tests.http.conftest import Server

BOOM = Failure(kind=FailureKind.RETRYABLE, code="boom", message="boom")

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def lease(job: JobState) -> Lease:
    assert job.worker_id is not None
    return Lease(job.job_id, job.run_number, job.attempt, job.worker_id)


def scrape(server: Server) -> Samples:
    response = server.client.get("/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain; version=0.0.4")
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(response.text)
        for sample in family.samples
    }


def total(samples: Samples, name: str) -> float:
    return sum(value for (sample, _), value in samples.items() if sample == name)


def run_some_jobs(ledger: Ledger, clock: FakeClock) -> None:
    """Three ``t`` jobs: one succeeds, one fails once then succeeds, one dies; two ``u``
    jobs: one dies at once, one is left pending."""
    ledger.define("u")
    ok = ledger.enqueue("t", {"n": 1}, max_attempts=2).job_id
    retried = ledger.enqueue("t", {"n": 2}, max_attempts=2).job_id
    dies = ledger.enqueue("t", {"n": 3}, max_attempts=1).job_id
    ledger.enqueue("u", {}, max_attempts=1)
    ledger.enqueue("u", {})
    jobs = {job.job_id: job for job in ledger.claim("w1", limit=4)}
    ledger.succeed(lease(jobs[ok]))
    ledger.fail(lease(jobs[retried]), BOOM)
    ledger.fail(lease(jobs[dies]), BOOM)
    [u_job] = [job for job_id, job in jobs.items() if job_id not in (ok, retried, dies)]
    ledger.fail(lease(u_job), BOOM)
    clock.advance(seconds=20)  # past the retry's backoff (10 s)
    [again] = ledger.claim("w1", types=["t"])
    assert again.job_id == retried
    ledger.succeed(lease(again))


def test_metrics_counters_equal_the_ledgers_counts(
    defined: Ledger, clock: FakeClock, server: Server
) -> None:
    """After jobs succeed, fail and die, /metrics' totals equal ``stats``' figures (every
    job enqueued once; successes, failed attempts and deaths in the last hour) and the jobs
    gauge equals the queue view's counts, per status and type."""
    run_some_jobs(defined, clock)
    stats = defined.stats()  # brings the audit view to the head, as a follower would
    samples = scrape(server)
    [hour] = [window for window in stats.windows if window.seconds == 3600]

    def sample(name: str, **labels: str) -> float:
        return samples[(name, tuple(sorted(labels.items())))]

    assert total(samples, "jobledger_jobs_enqueued_total") == sum(stats.by_status.values()) == 5
    assert total(samples, "jobledger_jobs_succeeded_total") == hour.succeeded == 2
    assert total(samples, "jobledger_job_attempts_failed_total") == hour.failed == 3
    assert total(samples, "jobledger_jobs_dead_lettered_total") == hour.dead == 2
    assert sample("jobledger_jobs_enqueued_total", type="u") == 2
    assert sample("jobledger_jobs_dead_lettered_total", type="t") == 1
    for job_type, statuses in stats.by_type.items():
        for status, n in statuses.items():
            assert sample("jobledger_jobs", status=status, type=job_type) == n
    assert sample("jobledger_projection_lag_events", projection="audit") == 0
    assert sample("jobledger_api_tokens", role="admin") == 1  # the fixture's
    assert sample("jobledger_health_ok") == 0  # no worker pool reports


def test_metrics_need_a_token_of_no_org(server: Server) -> None:
    """No token is 401; an org token (of any role) is 403: the figures span every org."""
    assert server.client.get("/metrics", headers=server.as_token(None)).status_code == 401
    for role in ("read", "admin"):
        org_token = server.token(role, "acme")
        response = server.client.get("/metrics", headers=server.as_token(org_token))
        assert response.status_code == 403, role
