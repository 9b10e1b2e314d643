"""Shell completion (docs/shell-completion.md): the console script prints each shell's
completion script, and bash, running that script, completes the commands."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import click
import pytest

from jobledger_cli.main import cli

JOBLEDGER = Path(sys.executable).parent / "jobledger"  # the console script of this install


def _jobledger(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(JOBLEDGER)], env={**os.environ, **env}, capture_output=True, text=True, check=False
    )


@pytest.mark.parametrize(
    ("shell", "registers"),
    [
        ("bash", "complete -o nosort -F _jobledger_completion jobledger"),
        ("zsh", "compdef _jobledger_completion jobledger"),
        ("fish", 'complete --no-files --command jobledger --arguments "(_jobledger_completion)"'),
    ],
)
def test_the_console_script_prints_the_shells_completion_script(shell: str, registers: str) -> None:
    """``_JOBLEDGER_COMPLETE={shell}_source jobledger`` exits 0 with a script that registers
    the completion function for ``jobledger``."""
    printed = _jobledger({"_JOBLEDGER_COMPLETE": f"{shell}_source"})
    assert printed.returncode == 0, printed.stderr
    assert registers in printed.stdout


def test_bash_running_the_script_completes_every_command(tmp_path: Path) -> None:
    """Sourced into bash, the script's function offers every top-level command for an empty
    word, and the subcommands of ``workflow`` after it."""
    script = tmp_path / "jobledger.bash"
    script.write_text(_jobledger({"_JOBLEDGER_COMPLETE": "bash_source"}).stdout)
    tab = (
        f'PATH="{JOBLEDGER.parent}:$PATH"; . "{script}"; '
        'COMP_WORDS=("${WORDS[@]}"); COMP_CWORD=$(( ${#WORDS[@]} - 1 )); '
        '_jobledger_completion jobledger; printf "%s\\n" "${COMPREPLY[@]}"'
    )

    def offered(*words: str) -> list[str]:
        quoted = " ".join(f'"{word}"' for word in words)
        run = subprocess.run(
            ["bash", "-c", f"WORDS=({quoted}); {tab}"], capture_output=True, text=True, check=True
        )
        return run.stdout.split()

    context = click.Context(cli)
    workflow = cli.get_command(context, "workflow")
    assert isinstance(workflow, click.Group)
    assert offered("jobledger", "") == cli.list_commands(context)
    assert offered("jobledger", "workflow", "") == workflow.list_commands(context)
    assert offered("jobledger", "wor") == ["worker", "workflow"]
