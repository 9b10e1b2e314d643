"""Run ``jobledger`` commands in several processes released together by a barrier."""

from __future__ import annotations

import multiprocessing
from typing import Any, NamedTuple


class Outcome(NamedTuple):
    exit_code: int
    stdout: str
    stderr: str


def _run(barrier: Any, args: list[str], results: Any) -> None:
    from click.testing import CliRunner

    from jobledger_cli.main import cli

    runner = CliRunner()
    barrier.wait(timeout=60)  # every process has imported the CLI: start together
    result = runner.invoke(cli, args)
    results.put(Outcome(result.exit_code, result.stdout, result.stderr))


def run_together(args: list[str], processes: int) -> list[Outcome]:
    """Run ``jobledger ARGS`` in ``processes`` fresh interpreters at the same moment; each
    one's exit code, stdout and stderr (log lines included)."""
    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(processes)
    results = context.Queue()
    children = [
        context.Process(target=_run, args=(barrier, args, results)) for _ in range(processes)
    ]
    for child in children:
        child.start()
    outcomes = [results.get(timeout=300) for _ in children]
    for child in children:
        child.join(timeout=60)
    return outcomes
