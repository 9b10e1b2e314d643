"""Typed option objects for commands with many options: :func:`option_group` hands a command
the click options named by a dataclass's fields as one value of that dataclass.

The options themselves stay declared on the command, in the order ``--help`` lists them; only
what the function receives changes, so a group may gather options that ``--help`` shows apart.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

Command = Callable[..., None]


def option_group(name: str, group: type[DataclassInstance]) -> Callable[[Command], Command]:
    """Pass the command's options named by ``group``'s fields as one ``group(...)``, keyword
    ``name``. Put it under ``@click.command()``, the options and any ``@click.pass_obj``, just
    above the function, which then takes ``name`` instead of those options."""
    fields = [field.name for field in dataclasses.fields(group)]

    def decorate(command: Command) -> Command:
        @functools.wraps(command)
        def with_group(*args: Any, **options: Any) -> None:
            options[name] = group(**{field: options.pop(field) for field in fields})
            command(*args, **options)

        return with_group

    return decorate
