"""Claims by queue on both backends: only the named queues, the default queue, claim order."""

from __future__ import annotations

import pytest

from ledger import EnqueueRequest, JobStatus, Ledger
from ledger.core.errors import InvalidRequestError
from ledger.core.values import DEFAULT_QUEUE


def test_a_queue_filter_claims_only_that_queues_jobs(defined: Ledger) -> None:
    """queues=["a"] leases a's jobs and leaves b's and the queue-less ones pending."""
    a_jobs = [
        e.job_id
        for e in defined.enqueue_many([EnqueueRequest(job_type="t", queue="a") for _ in range(3)])
    ]
    defined.enqueue("t", queue="b")
    defined.enqueue("t")
    claimed = defined.claim("w", limit=10, queues=["a"])
    assert [job.job_id for job in claimed] == a_jobs
    assert defined.counts() == {"leased": 3, "pending": 2}


def test_jobs_without_a_queue_are_the_default_queue(defined: Ledger) -> None:
    """A job enqueued without a queue, and one enqueued to "default", are both claimed by
    queues=["default"]; a named queue's job is not."""
    assert DEFAULT_QUEUE == "default"
    plain = defined.enqueue("t").job_id
    named_default = defined.enqueue("t", queue="default").job_id
    defined.enqueue("t", queue="a")
    claimed = defined.claim("w", limit=10, queues=[DEFAULT_QUEUE])
    assert [job.job_id for job in claimed] == [plain, named_default]


def test_several_queues_keep_claim_order_and_combine_with_types(defined: Ledger) -> None:
    """queues=[a, b] claims across both in claim order (priority first); with types, a job
    must match both filters."""
    defined.define("u")
    low_a = defined.enqueue("t", queue="a", priority=1).job_id
    high_b = defined.enqueue("t", queue="b", priority=9).job_id
    defined.enqueue("t", queue="c", priority=99)
    u_in_a = defined.enqueue("u", queue="a", priority=50).job_id
    [job] = defined.claim("w", limit=10, queues=["a", "b"], types=["u"])
    assert job.job_id == u_in_a
    claimed = defined.claim("w", limit=10, queues=["b", "a"])
    assert [job.job_id for job in claimed] == [high_b, low_a]


def test_an_empty_queue_list_claims_nothing_and_appends_nothing(defined: Ledger) -> None:
    """queues=[] claims nothing, as types=[] does; queues=None claims every queue."""
    defined.enqueue("t", queue="a")
    before = defined.store.head_position()
    assert defined.claim("w", queues=[]) == []
    assert defined.store.head_position() == before
    [job] = defined.claim("w", queues=None)
    assert job.status is JobStatus.LEASED


def test_a_blank_queue_name_is_refused(defined: Ledger) -> None:
    """A queue filter naming "" is request.invalid, as enqueue's own queue check."""
    with pytest.raises(InvalidRequestError):
        defined.claim("w", queues=[""])


def test_a_queue_named_twice_is_claimed_once(defined: Ledger) -> None:
    """queues=["a", "a"] claims each of a's jobs once."""
    ids = [
        e.job_id
        for e in defined.enqueue_many([EnqueueRequest(job_type="t", queue="a") for _ in range(2)])
    ]
    claimed = defined.claim("w", limit=10, queues=["a", "a"])
    assert [job.job_id for job in claimed] == ids
