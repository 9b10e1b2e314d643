"""Ids derived from their cause, so that replaying a history gives the same ids (as
:func:`ledger.core.policy.follow_up_id` does for policies' follow-up jobs)."""

from __future__ import annotations

from uuid import UUID, uuid5

WORKFLOW_NAMESPACE = UUID("5d0c7a3e-8f41-4b6e-9c2a-7e1f3b9d6a05")


def step_job_id(run_id: UUID, step_key: str, generation: int = 0) -> UUID:
    """The id of the job that runs ``step_key`` of ``run_id``. ``generation`` is 0 for the
    step's first job; a later feature that re-runs a step inside its run counts it up."""
    return uuid5(WORKFLOW_NAMESPACE, f"step:{run_id}:{generation}:{step_key}")


def recovery_run_id(source_run_id: UUID, request_key: str) -> UUID:
    """The id of the run that recovers ``source_run_id`` under ``request_key``: a repeat of
    the same recovery finds the run it made."""
    return uuid5(WORKFLOW_NAMESPACE, f"recover:{source_run_id}:{request_key}")


RELEASE_LOCK_NAMESPACE = 0x6A6C_7766_7265_6C73
"""Folded into every run's release-lock key ("jlwfrels"), so it cannot collide with keys
other code takes from the same uuids."""


def release_lock_key(run_id: UUID) -> int:
    """The run's release-lock key: a signed 64-bit integer (PostgreSQL's advisory-lock key),
    the high half of the run id xor its low half xor :data:`RELEASE_LOCK_NAMESPACE`."""
    value = run_id.int
    folded = (value >> 64) ^ (value & 0xFFFF_FFFF_FFFF_FFFF) ^ RELEASE_LOCK_NAMESPACE
    return folded - (1 << 64) if folded >= 1 << 63 else folded
