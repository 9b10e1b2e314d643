"""How the CLI fails: one ``error: …`` line on stderr and an exit code that says whose fault.

Exit codes: 0 success; 1 the ledger or the database refused (the line carries the
:class:`~ledger.core.errors.LedgerError`'s stable ``code``); 2 the command line itself was wrong
(click's convention), a malformed database URL (``config.invalid_url``) included, and its line
ends with the help hint (``see 'jobledger show --help'``); 130 interrupted (Ctrl-C). Every
message passes through :func:`redact` first, because ledger and driver messages may quote the
database URL, and a URL may carry a password.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import IO, Any

import click

from .render import first_line, printable
from ledger.core.errors import LedgerError
from ledger.store.config import DatabaseUrlError

# Up to the LAST "@" before the path: a password may hold a raw "@" (libpq then takes its tail
# for the host), and masking to the first one would leak that tail.
_URL_PASSWORD = re.compile(r"(://[^/@\s:]*):[^/\s]*@")
# Up to whitespace, a quote or "&": over-masking is harmless, a partial leak is not.
_KEYWORD_PASSWORD = re.compile(r"(password=)[^&\s'\"]*", re.IGNORECASE)


def redact(text: str) -> str:
    """``text`` with any password in a URL (``user:pw@``) or ``password=…`` replaced."""
    text = _URL_PASSWORD.sub(r"\1:***@", text)
    return _KEYWORD_PASSWORD.sub(r"\1***", text)


class CliError(click.ClickException):
    """A failure shown as a single ``error: <message>`` line on stderr."""

    def __init__(self, message: str) -> None:
        super().__init__(printable(first_line(redact(message))))

    def show(self, file: IO[Any] | None = None) -> None:
        click.echo(f"error: {self.message}", file=file, err=file is None)


class RefusedError(CliError):
    """The ledger or the database refused: exit code 1."""

    exit_code = 1


class InterruptedByUserError(CliError):
    """Ctrl-C: exit code 130, as a shell reports a process ended by SIGINT."""

    exit_code = 130


class BadUsageError(CliError):
    """The command line was wrong: exit code 2, as click's own usage errors."""

    exit_code = 2


def _usage_message(exc: click.UsageError) -> str:
    ctx = exc.ctx or click.get_current_context(silent=True)
    hint = f" (see '{ctx.command_path} --help')" if ctx is not None else ""
    return f"{exc.format_message()}{hint}"


@contextmanager
def one_line_errors() -> Iterator[None]:
    """Turn expected failures raised inside the block into :class:`CliError`.

    Anything else (a bug) keeps its traceback: hiding it would make it unfixable.
    """
    try:
        yield
    except click.exceptions.NoArgsIsHelpError:
        raise  # ``jobledger`` alone: click prints the help, which is what the user wants
    except click.UsageError as exc:
        raise BadUsageError(_usage_message(exc)) from None
    except DatabaseUrlError as exc:
        raise BadUsageError(str(exc)) from None  # --db or $JOBLEDGER_DB was given wrong
    except KeyboardInterrupt:
        # click would print "Aborted!" (its own style) and exit 1, as if the ledger refused.
        raise InterruptedByUserError("interrupted") from None
    except LedgerError as exc:
        # The store raises every database error as a LedgerError (mapped by SQLSTATE or
        # result code), so no driver error needs catching here.
        raise RefusedError(str(exc)) from None
