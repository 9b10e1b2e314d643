"""bench/ab.py's parts: the run order, a side's code, the figures it reads (not a timing)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path[:0] = [str(BENCH)]

import ab  # noqa: E402


def test_each_side_runs_first_as_often_as_the_other() -> None:
    assert ab.order(1) == ["A", "B"]
    assert ab.order(4) == ["A", "B", "B", "A", "A", "B", "B", "A"]
    assert ab.order(3).count("A") == ab.order(3).count("B") == 3
    # a bisect's points: forward, then backward
    assert ab.order(2, ["A", "B", "C"]) == ["A", "B", "C", "C", "B", "A"]


def test_a_commit_is_its_own_tree_and_its_interpreter_imports_it(tmp_path: Path) -> None:
    """``HEAD`` is archived apart from the checkout and the side's interpreter imports that
    copy of ``ledger``, not the installed one; ``.`` is the checkout itself."""
    code = ab.materialise("HEAD", tmp_path)
    assert code.parent == tmp_path and (code / "ledger" / "__init__.py").exists()
    assert (code / "projections" / "__init__.py").exists()
    ab.check_side(code)  # raises SystemExit if the installed ledger would be imported
    found = subprocess.run(
        [sys.executable, "-c", "import ledger; print(ledger.__file__)"],
        env=ab.side_env(code),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert Path(found).is_relative_to(code)
    assert ab.materialise(".", tmp_path) == ab.ROOT


def test_the_figures_are_read_from_a_compare_run_and_compared_by_median() -> None:
    def run(jobs_per_s: float, cpu: float) -> dict[str, object]:
        round_ = {"process_jobs_per_s": jobs_per_s, "extra": {"client_cpu_us_per_job": cpu}}
        return {"configs": {"jobledger[depth=110]": {"rounds": [round_]}}}

    assert ab.figures(run(2000.0, 300.0)) == {
        "jobledger[depth=110]": {"process_jobs_per_s": 2000.0, "client_cpu_us_per_job": 300.0}
    }
    samples: dict[str, dict[str, dict[str, list[float]]]] = {"A": {}, "B": {}}
    for side, values in (("A", [(2000.0, 300.0), (2200.0, 320.0)]), ("B", [(3000.0, 200.0)])):
        for jobs, cpu in values:
            for config, found in ab.figures(run(jobs, cpu)).items():
                for name, value in found.items():
                    samples[side].setdefault(config, {}).setdefault(name, []).append(value)
    lines = ab.table(samples)
    [jobs_line] = [line for line in lines if "end-to-end" in line]
    [cpu_line] = [line for line in lines if "worker CPU" in line]
    assert jobs_line.split()[-1] == "1.429"  # 3000 / median(2000, 2200)
    assert cpu_line.split()[-1] == "0.645"  # 200 / median(300, 320)
    assert "2,100 (2,000-2,200)" in jobs_line
    # a third point is compared with the first too
    samples["C"] = {c: {k: [v[0] * 2] for k, v in f.items()} for c, f in samples["B"].items()}
    [jobs_line] = [line for line in ab.table(samples) if "end-to-end" in line]
    assert jobs_line.split()[-2:] == ["1.429", "2.857"]
