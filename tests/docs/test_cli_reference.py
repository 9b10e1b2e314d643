"""docs/cli.md is the hand-written guide (the generated reference is docs/reference/cli.md,
checked in test_site.py): its command table must still name every command the CLI has, and
every ``workflow`` subcommand."""

from __future__ import annotations

from pathlib import Path

import click

from jobledger_cli.main import cli

CLI_MD = Path(__file__).resolve().parents[2] / "docs" / "cli.md"


def _table() -> str:
    text = CLI_MD.read_text(encoding="utf-8")
    return text[text.index("| Command |") : text.index("`jobledger --help`")]


def test_the_command_table_names_every_command() -> None:
    """Each top-level command appears in the table as `` `name``."""
    context = click.Context(cli)
    missing = [name for name in cli.list_commands(context) if f"`{name}" not in _table()]
    assert missing == []


def test_the_command_table_names_every_workflow_subcommand() -> None:
    """Each ``jobledger workflow`` subcommand appears in a workflow row of the table, as
    ``workflow name`` or after a slash (`` `name``)."""
    context = click.Context(cli)
    group = cli.get_command(context, "workflow")
    assert isinstance(group, click.Group)
    rows = [line for line in _table().splitlines() if line.startswith("| `workflow ")]
    missing = [
        name
        for name in group.list_commands(context)
        if not any(f"workflow {name}" in row or f"`{name}" in row for row in rows)
    ]
    assert missing == []


def _leaf_commands(command: click.Command, path: str) -> list[tuple[str, click.Command]]:
    if not isinstance(command, click.Group):
        return [(path, command)]
    context = click.Context(command)
    found: list[tuple[str, click.Command]] = [(path, command)]
    for name in command.list_commands(context):
        subcommand = command.get_command(context, name)
        assert subcommand is not None, name
        found += _leaf_commands(subcommand, f"{path} {name}")
    return found


def test_every_option_says_what_it_does() -> None:
    """Each option of every command has help text: the generated reference
    (docs/reference/cli.md) prints an option without it as ``N/A``."""
    unexplained = [
        f"{path} {option.opts[0]}"
        for path, command in _leaf_commands(cli, "jobledger")
        for option in command.params
        if isinstance(option, click.Option) and not option.hidden and not option.help
    ]
    assert unexplained == []
