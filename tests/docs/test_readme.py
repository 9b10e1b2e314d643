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
    """The ten-line example enqueues, claims, fails and prints five events in order."""
    [example] = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    monkeypatch.chdir(tmp_path)
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(example, str(README), "exec"), {})
    names = [line.split()[1] for line in printed.getvalue().splitlines()]
    assert names == [
        "job_enqueued",
        "job_leased",
        "job_stage_changed",
        "job_failed",
        "job_retry_scheduled",
    ]
