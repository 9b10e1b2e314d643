"""Lease lengths: one for every job type, or one per job type."""

from __future__ import annotations

from collections.abc import Mapping

DEFAULT_LEASE_S = 30.0

LeaseLength = float | Mapping[str, float]
"""A lease length in seconds, for every job type or per job type (others get the default)."""


def lease_for(lease_s: LeaseLength, job_type: str) -> float:
    """The lease length of ``job_type``'s jobs."""
    if isinstance(lease_s, Mapping):
        return float(lease_s.get(job_type, DEFAULT_LEASE_S))
    return lease_s


def all_positive(lease_s: LeaseLength) -> bool:
    """Whether every length given is positive."""
    lengths = lease_s.values() if isinstance(lease_s, Mapping) else [lease_s]
    return all(length > 0 for length in lengths)
