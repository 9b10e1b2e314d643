"""The ``jobledger`` click tree, walked: every command with its path, for tests that must
hold for every command and option (a command added later is walked too)."""

from __future__ import annotations

from collections.abc import Iterator

import click

from jobledger_cli.main import cli


def every_command() -> Iterator[tuple[list[str], click.Command]]:
    """``(["schedule", "add"], command)`` for every command under ``jobledger``, groups
    included (``dlq`` takes ``--type`` itself), as the ``jobledger`` group hands them out
    (lazily imported, as a user's run gets them)."""
    yield from _walk(cli, [], click.Context(cli, info_name="jobledger"))


def _walk(
    command: click.Command, path: list[str], ctx: click.Context
) -> Iterator[tuple[list[str], click.Command]]:
    if path:
        yield path, command
    if isinstance(command, click.Group):
        for name in command.list_commands(ctx):
            child = command.get_command(ctx, name)
            assert child is not None
            child_ctx = click.Context(child, info_name=name, parent=ctx)
            yield from _walk(child, [*path, name], child_ctx)
