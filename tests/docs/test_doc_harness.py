"""The docs runner itself: what it counts as an example, and how it compares outputs."""

from __future__ import annotations

from pathlib import Path

import pytest
from doc_blocks import DocFormatError, Kind, examples_of
from doc_output import Bindings, compare
from doc_session import DocSession, commands_of

ID_A = "f039ccd2-2992-474a-876c-b4f5d404ccbb"
ID_B = "69a74bf2-b96b-4df2-a891-bbf5f48d5966"
PRINTED_A = "0b7c0e8e-2b8f-4a53-9c8e-3f1d2c556a11"
PRINTED_B = "44e6db5f-2f83-42b7-af2d-711075de5167"


def page(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "page.md"
    path.write_text(text, encoding="utf-8")
    return path


def test_examples_are_python_blocks_console_sessions_and_hidden_setups(tmp_path: Path) -> None:
    """Python fences, ``$`` sessions and setup comments are examples, with their lines; other
    fences are prose, and a no-run block is kept as skipped with its reason."""
    doc = page(
        tmp_path,
        "```python\nx = 1\n```\n"
        "```\njobledger [--db URL]\n```\n"
        "<!-- doc: setup\ny = 2\n-->\n"
        "```\n$ jobledger init\ninitialised\n```\n"
        "<!-- doc: no-run (runs forever) -->\n```\n$ jobledger worker\n```\n",
    )
    found = [(e.line, e.kind, e.hidden, e.why_skipped) for e in examples_of(doc)]
    assert found == [
        (1, Kind.PYTHON, False, ""),
        (7, Kind.PYTHON, True, ""),
        (10, Kind.CONSOLE, False, ""),
        (15, Kind.SKIPPED, False, "runs forever"),
    ]


@pytest.mark.parametrize(
    "text",
    [
        "<!-- doc: no-run -->\n```\n$ jobledger init\n```\n",  # no reason given
        "<!-- doc: run-twice -->\n",  # unknown directive
        "<!-- doc: no-run (why) -->\n```\nprose\n```\n",  # skipping what never runs
        "```python\nx = 1\n",  # unclosed fence
    ],
)
def test_malformed_markup_is_an_error_not_a_silent_skip(tmp_path: Path, text: str) -> None:
    """A directive the runner cannot honour fails loudly instead of running less."""
    with pytest.raises(DocFormatError):
        examples_of(page(tmp_path, text))


def test_a_session_splits_into_commands_outputs_and_exit_codes(tmp_path: Path) -> None:
    """``[exit N]`` ends an output; a command followed by ``echo $?`` leaves its code to it."""
    doc = page(
        tmp_path,
        "```\n$ jobledger a\nout\n[exit 2]\n\n$ jobledger b\n$ echo $?\n1\n$ jobledger c\n```\n",
    )
    [example] = examples_of(doc)
    commands = [(c.line, c.text, c.documented, c.exit_code) for c in commands_of(example)]
    assert commands == [
        (2, "jobledger a", "out", 2),
        (6, "jobledger b", "", None),
        (7, "echo $?", "1", 0),
        (9, "jobledger c", "", 0),
    ]


def test_volatile_tokens_match_any_value_and_the_rest_literally() -> None:
    """Times, durations, directories and spacing may differ; a word may not."""
    documented = "rebuilt  at 2026-11-29T22:59:07.984Z in 0.83s into /tmp/x/jobledger.db"
    printed = "rebuilt at 2026-12-01T09:00:00.000Z in 12.5s into /tmp/pytest-1/a/jobledger.db"
    assert compare(documented, printed, Bindings()) is None
    diff = compare(documented, printed.replace("rebuilt", "built"), Bindings())
    assert diff is not None and "-rebuilt" in diff and "+built" in diff


def test_a_bound_id_must_print_as_the_same_value_throughout_the_page() -> None:
    """A documented UUID stands for one printed UUID, and two documented ones for two."""
    bindings = Bindings()
    assert compare(f"job {ID_A}", f"job {PRINTED_A}", bindings) is None
    assert bindings.rewrite(f"jobledger show {ID_A}") == f"jobledger show {PRINTED_A}"
    assert compare(f"job {ID_A}", f"job {PRINTED_B}", bindings) is not None
    assert compare(f"job {ID_B}", f"job {PRINTED_A}", bindings) is not None
    assert compare(f"job {ID_B}", f"job {PRINTED_B}", bindings) is None


def test_an_elision_stands_for_any_lines_and_a_progress_bar_is_optional() -> None:
    """``…`` skips lines (none or many) but what follows it must still be there."""
    documented = "first\nworking  [####]  3/3\n…\nlast"
    assert compare(documented, "first\nlast", Bindings()) is None
    assert compare(documented, "first\na\nb\nlast", Bindings()) is None
    assert compare(documented, "first\na\nb", Bindings()) is not None


def test_a_console_example_fails_on_a_wrong_exit_code_naming_the_line(tmp_path: Path) -> None:
    """A command whose exit code differs from the page fails with the page and line."""
    doc = page(tmp_path, "\n```\n$ jobledger --db missing.db definitions\n```\n")
    [example] = examples_of(doc)
    outcome = DocSession(tmp_path).run(example)
    assert outcome.failure is not None
    assert outcome.failure.startswith("page.md:3: $ jobledger --db missing.db definitions")
    assert "exit code 1, documented 0" in outcome.failure
