"""The per-job report of an operator command over many jobs (``dlq requeue --all``,
``cancel`` of several ids): each job done or refused, in one table, and the exit it makes."""

from __future__ import annotations

from collections.abc import Sequence

from .errors import RefusedError
from .render import MISSING, table
from ledger.jobs.operator_writes import Refusal

HEADERS = ["JOB", "TYPE", "OUTCOME", "DETAIL"]


def per_job_report(
    verb: str, noun: str, done: Sequence[tuple[str, str, str]], refused: Sequence[Refusal]
) -> str:
    """``<verb> N of M <noun>, K refused`` over a table: ``done`` rows are (job id, type,
    detail) of the jobs the command changed; each refusal shows its code and message."""
    summary = f"{verb} {len(done)} of {len(done) + len(refused)} {noun}, {len(refused)} refused"
    rows = [[job, job_type, verb, detail] for job, job_type, detail in done]
    rows += [
        [str(r.job_id), r.job_type or MISSING, "refused", f"{r.code}: {r.message}"] for r in refused
    ]
    return f"{summary}\n{table(HEADERS, rows)}"


def raise_if_refused(command: str, noun: str, done: int, refused: Sequence[Refusal]) -> None:
    """Exit 1 with one ``error:`` line if any job was refused (the report is on stdout)."""
    if refused:
        total = done + len(refused)
        raise RefusedError(f"{len(refused)} of {total} {noun} refused {command}")
