"""The CLI's manners (issue 17): ``--json`` everywhere, commands grouped by task, progress only
on a terminal, one error style, NO_COLOR, suggestions that run as printed, and read commands
that load no driver or server they do not use."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from unittest import mock

import click
import pytest
from cli_helpers import Run, assert_one_error_line, invoke

from jobledger_cli import progress
from jobledger_cli.invocation import program
from jobledger_cli.main import COMMANDS, SECTIONS, LedgerGroup, cli

SCRIPT = Path(sys.executable).parent / "jobledger"

NO_JSON = {
    "jobledger serve": "it serves until stopped; what it serves (the API) is JSON already",
    "jobledger workflow graph": "its output is a drawing (--format text|dot|mermaid); the "
    "same DAG as data is `workflow show RUN --json`",
}
"""The leaf commands without ``--json``, each with why JSON could not mean anything there."""


def _leaves(command: click.Command, path: str, ctx: click.Context) -> Iterator[tuple[str, bool]]:
    if isinstance(command, click.Group):
        sub = click.Context(command, info_name=path.rsplit(" ", 1)[-1], parent=ctx)
        for name in command.list_commands(sub):
            child = command.get_command(sub, name)
            assert child is not None
            yield from _leaves(child, f"{path} {name}", sub)
        return
    options = [p for p in command.params if isinstance(p, click.Option)]
    yield path, any("--json" in option.opts for option in options)


def test_every_leaf_command_has_json_but_the_justified_few() -> None:
    """Walking the whole click tree: each leaf command takes ``--json``, except those in
    :data:`NO_JSON` (and those still have none, so the list stays true)."""
    ctx = click.Context(cli, info_name="jobledger")
    leaves = dict(_leaves(cli, "jobledger", ctx))
    assert len(leaves) > 40
    without = {path for path, has_json in leaves.items() if not has_json}
    assert without == set(NO_JSON)


def test_init_enable_and_disable_print_json(run: Run) -> None:
    """``init --json`` says whether it created the ledger; ``enable``/``disable --json`` print
    the definition after the change (both backends)."""
    init = run("init", "--json")
    assert init.exit_code == 0, init.stderr
    assert json.loads(init.stdout)["created"] is False  # the fixture's ledger exists
    assert run("define", "t").exit_code == 0
    disabled = run("disable", "t", "--json")
    assert disabled.exit_code == 0, disabled.stderr
    assert (json.loads(disabled.stdout)["job_type"], json.loads(disabled.stdout)["enabled"]) == (
        "t",
        False,
    )
    assert json.loads(run("enable", "t", "--json").stdout)["enabled"] is True


def test_init_json_on_a_new_sqlite_file(tmp_path: Path) -> None:
    """On a new file ``init --json`` reports it created the ledger, and nothing else on
    stdout."""
    result = invoke(str(tmp_path / "new.db"), "init", "--json")
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["created"] is True


def test_help_lists_every_command_once_under_a_task_heading() -> None:
    """``jobledger --help`` shows each section heading and each command exactly once; every
    command of the table is in one section."""
    names = [name for entries in SECTIONS.values() for name in entries]
    assert sorted(names) == sorted(COMMANDS) and len(names) == len(set(names))
    result = invoke(None, "--help")
    assert result.exit_code == 0
    lines = result.stdout.splitlines()
    for title in SECTIONS:
        assert f"{title}:" in lines
    listed = [line.split()[0] for line in lines if line.startswith("  ") and line.split()]
    for name in COMMANDS:
        assert listed.count(name) == 1, name


def _modules_after(argv: list[str], cwd: Path) -> set[str]:
    """The modules a fresh interpreter holds after running ``jobledger argv…`` in-process."""
    probe = (
        "import sys, json\n"
        "from jobledger_cli.main import cli\n"
        "try:\n"
        f"    cli.main({argv!r}, prog_name='jobledger')\n"
        "except SystemExit as exc:\n"
        "    assert not exc.code, exc.code\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], cwd=cwd, capture_output=True, text=True, check=True
    )
    return set(json.loads(done.stdout.splitlines()[-1]))


def test_help_imports_no_command_and_no_store(tmp_path: Path) -> None:
    """``--help`` lists the commands from the table: no command module, nor the store, the
    ledger's API or msgspec schemas of views, is imported to draw it."""
    loaded = _modules_after(["--help"], tmp_path)
    commands = {f"jobledger_cli{target.split(':')[0]}" for target in COMMANDS.values()}
    assert not commands & loaded
    assert not {"ledger.store.store", "ledger.api.ledger", "ledger.api.shaping"} & loaded


def test_show_on_sqlite_loads_no_driver_or_server_it_does_not_use(
    sqlite_url: str, tmp_path: Path
) -> None:
    """``show JOB`` on a SQLite ledger loads neither psycopg nor the HTTP stack (Litestar,
    uvicorn, Jinja2), prometheus_client, the worker pool or asyncio's event loop."""
    enqueued = invoke(sqlite_url, "enqueue", "--auto-define", "--json", "t")
    job = json.loads(enqueued.stdout)["job_id"]
    for command in (["show", job], ["history", job], ["jobs"], ["stats"]):
        loaded = _modules_after(["--db", sqlite_url, *command], tmp_path)
        unused = {
            "psycopg",
            "psycopg_pool",
            "eventsourcing.postgres",
            "litestar",
            "uvicorn",
            "jinja2",
            "prometheus_client",
            "ledger.http",
            "ledger.runtime.pool",
            "asyncio.base_events",
        }
        assert not unused & loaded, (command, unused & loaded)


def test_progress_is_not_written_into_a_pipe(tmp_path: Path) -> None:
    """Real processes with stderr a pipe: ``demo`` writes its two status lines and no
    ``working`` bar; ``projections verify`` and ``replay --check --all`` write nothing on
    stderr."""
    db = tmp_path / "demo.db"
    demo = subprocess.run(
        [str(SCRIPT), "--db", str(db), "demo", "--jobs", "10"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
    )
    lines = demo.stderr.splitlines()
    assert [line.split()[0] for line in lines] == ["enqueued", "started"], demo.stderr
    for args in (["projections", "verify"], ["replay", "--check", "--all", "--batch", "2"]):
        done = subprocess.run(
            [str(SCRIPT), "--db", str(db), *args], capture_output=True, text=True, check=True
        )
        assert done.stderr == "", (args, done.stderr)
        assert done.stdout  # the result itself is still printed


def test_progress_is_shown_on_a_terminal(sqlite_url: str) -> None:
    """With stderr a terminal, ``replay --check --all`` reports each batch on stderr."""
    for n in range(3):
        invoke(sqlite_url, "enqueue", "--auto-define", "t", json.dumps({"n": n}))
    with mock.patch.object(progress, "bars_drawn", lambda: True):
        result = invoke(sqlite_url, "replay", "--check", "--all", "--batch", "1")
    assert result.exit_code == 0, result.stderr
    assert "checked 1 job(s)" in result.stderr and "checked 3 job(s)" in result.stderr


@pytest.mark.parametrize(
    "args",
    [
        ["no-such-command"],
        ["show"],
        ["show", "not-a-uuid"],
        ["jobs", "--status", "bogus"],
        ["--bogus"],
        ["workflow", "no-such-command"],
        ["queue", "pause"],
    ],
)
def test_usage_errors_are_one_error_line_with_the_help_hint(args: list[str]) -> None:
    """Click's own usage errors, at any depth: one ``error:`` line ending with the hint to the
    right ``--help``, exit 2."""
    result = invoke(None, *args)
    assert_one_error_line(result, "error: ", exit_code=2)
    assert result.stderr.rstrip().endswith("--help')"), result.stderr


def test_a_refusal_is_one_error_line_with_its_code(sqlite_url: str) -> None:
    """A refused command prints one ``error: <code>: …`` line and exits 1."""
    result = invoke(sqlite_url, "show", "01a2350d-eb82-7a78-836c-b8ff2a1d5c31")
    assert_one_error_line(result, "error: job.not_found: ", exit_code=1)


def test_ctrl_c_is_an_error_line_and_exit_130(sqlite_url: str) -> None:
    """Ctrl-C during a command prints ``error: interrupted`` (not click's ``Aborted!``) and
    exits 130."""
    with mock.patch("jobledger_cli.show.open_reader", side_effect=KeyboardInterrupt):
        result = invoke(sqlite_url, "show", "01a2350d-eb82-7a78-836c-b8ff2a1d5c31")
    assert_one_error_line(result, "error: interrupted", exit_code=130)


@pytest.mark.parametrize(("value", "color"), [("1", False), ("", None), (None, None)])
def test_no_color_turns_colour_off(
    monkeypatch: pytest.MonkeyPatch, value: str | None, color: bool | None
) -> None:
    """``NO_COLOR`` set and not empty turns click's colour off for the whole command (it is
    already off when stdout is not a terminal); unset or empty leaves click to decide."""
    if value is None:
        monkeypatch.delenv("NO_COLOR", raising=False)
    else:
        monkeypatch.setenv("NO_COLOR", value)
    assert isinstance(cli, LedgerGroup)
    ctx = cli.make_context("jobledger", ["stats"])
    assert ctx.color is color


def test_program_is_how_the_user_ran_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The command suggested back: the path as typed when ``jobledger`` is not on PATH,
    ``jobledger`` when PATH finds that same script, ``python -m`` for the module, and
    ``jobledger`` for anything else."""
    script = tmp_path / "venv" / "bin" / "jobledger"
    script.parent.mkdir(parents=True)
    script.write_text("#!/bin/sh\n")
    script.chmod(0o755)
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    assert program("venv/bin/jobledger") == "venv/bin/jobledger"
    assert program(str(tmp_path / "with space" / "jobledger")).startswith("'")
    monkeypatch.setenv("PATH", f"{script.parent}{os.pathsep}/usr/bin")
    assert program(str(script)) == "jobledger"
    assert program("/somewhere/cli/main.py", "/py") == "/py -m jobledger_cli.main"
    assert program("/usr/lib/python3/site-packages/pytest/__main__.py") == "jobledger"


def test_the_demos_suggestions_run_as_printed(tmp_path: Path) -> None:
    """As the README runs it (``.venv/bin/jobledger demo``, the venv not on PATH), each
    suggested next command runs as printed, in the same directory, and succeeds."""
    env = {**os.environ, "PATH": "/usr/bin:/bin"}
    env.pop("JOBLEDGER_DB", None)
    relative = os.path.relpath(SCRIPT, tmp_path)
    demo = subprocess.run(
        [relative, "demo", "--jobs", "20"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    after = demo.stdout.split("Next, try:\n", 1)[1]
    suggestions = [line.split("#")[0].strip() for line in after.splitlines() if line.strip()]
    assert len(suggestions) >= 3
    for suggestion in suggestions:
        assert shlex.split(suggestion)[0] == relative
        done = subprocess.run(
            suggestion,
            shell=True,
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        assert done.returncode == 0, (suggestion, done.stderr)


def test_shell_completion_completes_commands_and_choices() -> None:
    """click's bash completion, as docs/cli.md loads it, completes a command name and an
    option's choices (the lazy group resolves commands for it)."""
    base = {**os.environ, "_JOBLEDGER_COMPLETE": "bash_complete"}
    names = subprocess.run(
        [str(SCRIPT)],
        env={**base, "COMP_WORDS": "jobledger sh", "COMP_CWORD": "1"},
        capture_output=True,
        text=True,
        check=True,
    )
    assert names.stdout.split() == ["plain,show"]
    choices = subprocess.run(
        [str(SCRIPT)],
        env={**base, "COMP_WORDS": "jobledger jobs --status ", "COMP_CWORD": "3"},
        capture_output=True,
        text=True,
        check=True,
    )
    assert "plain,pending" in choices.stdout.split()
