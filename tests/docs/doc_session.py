"""Run one page's examples in order, as a reader following the page would.

A page gets one temporary directory (the current directory of everything it runs), one
Python namespace shared by its code blocks and hidden setups, and one set of bindings (see
``doc_output``). Console commands run through click's ``CliRunner`` on ``jobledger_cli.main.cli``,
in-process against the real ledger files and databases in that directory; a command that
needs a shell (``;``, ``>``, ``|``, or a program other than ``jobledger``) runs in a real
``bash`` with this interpreter's ``jobledger`` first on ``PATH``. Output is stdout and stderr
interleaved, as a terminal shows them, but without progress bars (their drawing depends on
the terminal and on timing; a documented bar line is optional, see ``doc_output``). The
database commands use by default is ``./jobledger.db`` in the page's directory, until a setup
calls ``doc.use(…)``.

A setup may set ``doc.clock`` to a ``FakeClock``: in-process commands then read their time from
it (the system clock is patched while they run), so a story told with leases that ran out or
a retry that came due needs no sleeping, and its durations print as on the page.

Hidden setups reach the session as ``doc`` (see :class:`DocSession`'s public methods).
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import shlex
import subprocess
import sys
import traceback
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any
from unittest import mock

import click
from click.testing import CliRunner, Result
from doc_blocks import Example, Kind
from doc_output import Bindings, compare

from jobledger_cli import progress as cli_progress
from jobledger_cli.main import cli
from ledger import Ledger
from ledger.clock import Clock, FakeClock, SystemClock

REPOSITORY = Path(__file__).resolve().parents[2]

SHELL_OPERATORS = frozenset({";", "|", ">", ">>", "<", "&&", "||"})
EXIT_LINE = "[exit "
PROMPT = "$ "


@dataclass(frozen=True)
class Command:
    line: int  # the page line of the ``$ `` prompt
    text: str
    documented: str
    exit_code: int | None  # None: the next command is ``echo $?``, which shows it


@dataclass(frozen=True)
class Outcome:
    """What running one example showed: None for a match, else why not (with a diff)."""

    example: Example
    failure: str | None


def commands_of(example: Example) -> list[Command]:
    """Split a console example into its commands, documented outputs and exit codes."""
    lines = example.text.strip("\n").splitlines()
    starts = [index for index, text in enumerate(lines) if text.startswith(PROMPT)]
    commands: list[Command] = []
    for number, start in enumerate(starts):
        end = starts[number + 1] if number + 1 < len(starts) else len(lines)
        output = lines[start + 1 : end]
        while output and not output[-1].strip():
            output.pop()  # a blank line between a command's output and the next prompt
        exit_code: int | None = 0
        if output and output[-1].startswith(EXIT_LINE):
            exit_code = int(output.pop()[len(EXIT_LINE) : -1])
        elif number + 1 < len(starts) and lines[starts[number + 1]] == "$ echo $?":
            exit_code = None
        text = lines[start][len(PROMPT) :]
        commands.append(Command(example.line + 1 + start, text, "\n".join(output), exit_code))
    return commands


@dataclass
class DocSession:
    """The state a page's examples share while they run in order."""

    directory: Path
    namespace: dict[str, Any] = field(default_factory=dict)
    bindings: Bindings = field(default_factory=Bindings)
    aliases: dict[str, str] = field(default_factory=dict)
    database: str | None = None  # JOBLEDGER_DB for the page's commands; None: ./jobledger.db
    clock: FakeClock | None = None  # the time of in-process commands; None: the system clock
    last_python: str = ""
    last_exit: int = 0

    def __post_init__(self) -> None:
        self.namespace.update(doc=self, __name__="__doc_example__")

    def bind(self, documented: str, actual: str) -> None:
        """Read the page's ``documented`` value (an id, say) as ``actual`` from here on."""
        conflict = self.bindings.bind([(documented, actual)])
        if conflict is not None:
            raise AssertionError(conflict)

    def use(self, url: str, *, create: bool = True) -> str:
        """Make ``url`` the database of the commands that follow (``JOBLEDGER_DB``); with
        ``create``, initialise it first. Returns ``url``."""
        self.database = url
        if create:
            with contextlib.chdir(self.directory):
                Ledger.open(url, create=True).close()
        return url

    @contextlib.contextmanager
    def ledger(self, clock: Clock | None = None) -> Iterator[Ledger]:
        """The current database's ledger, for a setup to write history with (by default on
        the page's clock)."""
        clock = clock or self.clock
        with contextlib.chdir(self.directory), Ledger.open(self.url, clock=clock) as opened:
            yield opened

    @property
    def url(self) -> str:
        return self.database or "jobledger.db"

    def cli(self, *args: str) -> Result:
        """Run ``jobledger args…`` as the page's commands run (for a setup); fails loudly."""
        with contextlib.chdir(self.directory):
            result = self._invoke(list(args))
        if result.exit_code != 0:
            raise AssertionError(f"setup command {args} failed: {result.output}")
        return result

    def save_python(self, name: str) -> None:
        """Write the page's last Python block to ``name`` (an application module, say)."""
        (self.directory / name).write_text(self.last_python, encoding="utf-8")

    def helper(self, relative: str) -> ModuleType:
        """A test helper module of this repository (one source of shared test histories)."""
        folder = str(REPOSITORY / Path(relative).parent)
        if folder not in sys.path:
            sys.path.insert(0, folder)
        return __import__(Path(relative).stem)

    def alias(self, documented: str, actual: str) -> None:
        """Read ``documented`` as ``actual`` in this page's commands and outputs (e.g. a
        database name the page made up, for the test's own database)."""
        self.aliases[documented] = actual

    def run(self, example: Example) -> Outcome:
        with contextlib.chdir(self.directory):
            if example.kind is Kind.PYTHON:
                return Outcome(example, self._run_python(example))
            if example.kind is Kind.CONSOLE:
                return Outcome(example, self._run_console(example))
        return Outcome(example, None)

    def _run_python(self, example: Example) -> str | None:
        printed = io.StringIO()
        code = compile("\n" * example.line + example.text, str(example.doc), "exec")
        try:
            with contextlib.redirect_stdout(printed):
                exec(code, self.namespace)
        except Exception:
            return f"{example.where}: the code raised\n{traceback.format_exc()}"
        self.namespace["printed"] = printed.getvalue()
        if not example.hidden:
            self.last_python = example.text
        return None

    def _run_console(self, example: Example) -> str | None:
        for command in commands_of(example):
            text = self.bindings.rewrite(self._dealias(command.text))
            try:
                exit_code, printed = self._execute(text)
            except Exception:
                return f"{example.doc.name}:{command.line}: $ {text}\n{traceback.format_exc()}"
            self.last_exit = exit_code
            where = f"{example.doc.name}:{command.line}: $ {command.text}"
            if command.exit_code is not None and exit_code != command.exit_code:
                return (
                    f"{where}\nexit code {exit_code}, documented {command.exit_code}; "
                    f"printed:\n{printed}"
                )
            diff = compare(self._dealias(command.documented), printed, self.bindings)
            if diff is not None:
                return f"{where}\noutput differs from the page:\n{diff}"
        return None

    def _dealias(self, text: str) -> str:
        for documented, actual in self.aliases.items():
            text = text.replace(documented, actual)
        return text

    def _execute(self, text: str) -> tuple[int, str]:
        if text == "echo $?":
            return 0, f"{self.last_exit}\n"
        lexer = shlex.shlex(text, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        lexer.commenters = "#"
        words = list(lexer)
        if words[0] != "jobledger" or SHELL_OPERATORS & set(words):
            return self._in_shell(text)
        result = self._invoke(words[1:])
        if result.exception is not None and not isinstance(result.exception, SystemExit):
            raise result.exception
        return result.exit_code, result.output

    def _invoke(self, args: list[str]) -> Result:
        with contextlib.ExitStack() as patches:
            patches.enter_context(mock.patch.object(click, "progressbar", _hidden_progressbar))
            # The pages show a terminal: progress as (hidden) bars, not as a log's lines.
            patches.enter_context(mock.patch.object(cli_progress, "bars_drawn", lambda: True))
            # Log records are not the command's output: without a handler of its own, logging
            # would print warnings to the captured stderr outside pytest and not under it.
            patches.enter_context(_logs_kept_out())
            if self.clock is not None:
                clock = self.clock
                patches.enter_context(mock.patch.object(SystemClock, "now", lambda _: clock.now()))
            return CliRunner().invoke(cli, args, env={"JOBLEDGER_DB": self.database})

    def _in_shell(self, text: str) -> tuple[int, str]:
        environment = {k: v for k, v in os.environ.items() if k != "JOBLEDGER_DB"}
        if self.database is not None:
            environment["JOBLEDGER_DB"] = self.database
        environment["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{environment['PATH']}"
        done = subprocess.run(
            ["bash", "-c", text],
            env=environment,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=60,
            check=False,
        )
        return done.returncode, done.stdout


_click_progressbar = click.progressbar


@contextlib.contextmanager
def _logs_kept_out() -> Iterator[None]:
    handler = logging.NullHandler()
    logging.getLogger().addHandler(handler)
    try:
        yield
    finally:
        logging.getLogger().removeHandler(handler)


def _hidden_progressbar(*args: Any, **kwargs: Any) -> Any:
    """click's progress bar, drawn into a buffer nobody reads."""
    return _click_progressbar(*args, **{**kwargs, "file": io.StringIO()})
