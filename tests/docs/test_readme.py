"""The README's Python example runs as written."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[2] / "README.md"


def test_readme_python_example_runs_and_prints_the_history(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The example enqueues a typed job, a pool runs it, and it prints the handler's output
    then the job's five events in order (the pool's start record, then the handler's stage)."""
    [example] = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    monkeypatch.chdir(tmp_path)
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(example, str(README), "exec"), {})
    output, *history = printed.getvalue().splitlines()
    assert output == "sent to ada@example.com"
    names = [line.split()[1] for line in history]
    assert names == [
        "job_enqueued",
        "job_leased",
        "job_stage_changed",
        "job_stage_changed",
        "job_succeeded",
    ]
