"""The retention policy's fold and rule choice, and the ``--after`` spelling (pure)."""

from __future__ import annotations

from datetime import UTC, datetime
from uuid import uuid5

import pytest

from ledger.core.errors import InvalidRequestError
from ledger.core.retention import (
    RETENTION_NAMESPACE,
    RETENTION_STREAM_ID,
    RetentionPolicySet,
    RetentionRule,
    check_status,
    fold_policy,
    format_after,
    parse_after,
)

AT = datetime(2026, 1, 1, tzinfo=UTC)


def _set(job_type: str | None, status: str | None, after_s: int | None) -> RetentionPolicySet:
    return RetentionPolicySet(at=AT, job_type=job_type, status=status, after_s=after_s, actor=None)


def test_the_most_specific_rule_wins_and_a_dropped_rule_is_gone() -> None:
    """Type and status beat type, type beats status, status beats the default; a rule set
    again replaces it, and ``after_s`` ``None`` drops it."""
    policy = fold_policy(
        [
            _set(None, None, 30),
            _set(None, "dead", 90),
            _set("report", None, 7),
            _set("report", "dead", 1),
            _set("report", None, 8),
        ]
    )
    assert policy.version == 5
    assert policy.rule_for("report", "dead") == RetentionRule("report", "dead", 1)
    assert policy.rule_for("report", "succeeded") == RetentionRule("report", None, 8)
    assert policy.rule_for("mail", "dead") == RetentionRule(None, "dead", 90)
    assert policy.rule_for("mail", "cancelled") == RetentionRule(None, None, 30)
    assert policy.shortest_after_s == 1
    dropped = fold_policy([_set(None, None, 30), _set(None, None, None)])
    assert dropped.rules == () and dropped.rule_for("mail", "dead") is None


def test_after_reads_one_unit_and_refuses_the_rest() -> None:
    """``30d`` and friends are seconds and spell back the same; anything else is refused."""
    assert [parse_after(t) for t in ("45s", "90m", "12h", "30d", "2w")] == [
        45,
        5_400,
        43_200,
        2_592_000,
        1_209_600,
    ]
    assert [format_after(s) for s in (45, 5_400, 43_200, 2_592_000, 1_209_600)] == [
        "45s",
        "90m",
        "12h",
        "30d",
        "2w",
    ]
    for bad in ("", "30", "0d", "-1d", "3x", "1.5d", "d"):
        with pytest.raises(InvalidRequestError):
            parse_after(bad)
    with pytest.raises(InvalidRequestError):
        check_status("pending")


def test_the_retention_stream_id_is_the_uuid5_of_its_name() -> None:
    """The id is written out (computing it at import cost every process OpenSSL's start-up);
    it must stay the one every existing ledger's retention stream was appended under."""
    assert uuid5(RETENTION_NAMESPACE, "retention") == RETENTION_STREAM_ID
