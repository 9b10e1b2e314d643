"""Named SQL queries, loaded from the ``.sql`` files shipped with the package.

Each query in ``ledger/store/sql/<backend>.sql`` (and in
``ledger/store/sql/<backend>_<feature>.sql``, the
queries of one feature, read after it in name order) starts with ``-- name: <entity>_<verb>``
and a one-line comment saying what it returns and which index it relies on.

A line ``-- include: <name>`` stands for the body of the query ``<name>``, defined earlier: an
expression several queries must spell exactly alike (the tailing readers' frontier, the
claim's pause check) is written once, as a ``fragment_*`` query that is never run on its own.

A query that comes in variants (the claim, with or without a type filter, with or without a
queue filter) is written once: a line ``-- variants: <flag>, <flag>`` after its name declares
the flags, and a line ``-- include if <flag>: <name>`` (or ``-- include unless <flag>:``)
stands for that fragment's body in the variants with (without) the flag. The loader composes
every variant and names it ``<name>`` followed by ``_<flag>`` for each flag it has, in the
declared order (``queue_claim``, ``queue_claim_types``, ``queue_claim_queues``,
``queue_claim_types_queues``). Each variant is a plain statement of its own, not one
statement whose parameters switch a filter off: the database plans (and PostgreSQL's
prepared statements cache) each variant for exactly the filters it has.

A kind of state declared outside the ledger (:func:`ledger.views.registry.register_kind`)
brings its own queries in the same form (:attr:`~ledger.views.kind.StateKind.sql`, by
backend): :func:`load` adds them to the files', so a store opened after the kind was
registered runs them like its own (its ``schema_*`` statements create its table). A kind's
text may include only its own fragments.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache
from itertools import product
from pathlib import Path

from ledger.views.kind import REGISTERED

SQL_DIRECTORY = Path(__file__).with_name("sql")
"""The ``.sql`` files, beside this module in the installed package (a plain path, not
``importlib.resources``: that import alone was ~4 ms of every CLI command's start, for a
package that is never run from a zip)."""

_NAME = re.compile(r"^--\s*name:\s*(\w+)\s*$")
_VARIANTS = re.compile(r"^--\s*variants:\s*(\w+(?:\s*,\s*\w+)*)\s*$")
_INCLUDE = re.compile(r"^(\s*)--\s*include(?:\s+(if|unless)\s+(\w+))?:\s*(\w+)\s*$")


@dataclass(frozen=True)
class _Choice:
    """A fragment's lines, in the variants where ``flag`` is set (``wanted``) or not."""

    flag: str
    wanted: bool
    lines: tuple[str, ...]


@dataclass
class _Query:
    lines: list[str | _Choice]
    flags: tuple[str, ...] = ()


def load(backend: str) -> dict[str, str]:
    """All queries of ``backend`` ("postgres" or "sqlite"), by name, in file order (a query
    with variants as each of its variants, in the order of the flags' subsets), then the
    registered kinds' own (a name the files hold already is a ``ValueError``)."""
    files = _files(backend)
    extra = [(f"kind {k.name!r}", k.sql[backend]) for k in REGISTERED if backend in k.sql]
    kinds = compose(extra) if extra else {}
    clash = [name for name in kinds if name in files]
    if clash:
        raise ValueError(f"a registered kind's query {clash[0]!r} is the ledger's own")
    return {**files, **kinds} if kinds else files


@cache
def _files(backend: str) -> dict[str, str]:
    """The queries of the ``.sql`` files of ``backend``, by name, in file order."""
    directory = SQL_DIRECTORY
    features = sorted(
        entry.name
        for entry in directory.iterdir()
        if entry.name.startswith(f"{backend}_") and entry.name.endswith(".sql")
    )
    return compose(
        (file_name, directory.joinpath(file_name).read_text(encoding="utf-8"))
        for file_name in (f"{backend}.sql", *features)
    )


def compose(files: Iterable[tuple[str, str]]) -> dict[str, str]:
    """The queries of ``files`` (file name and text, read in order), by name: every include
    expanded, a query with variants as each of its variants. A query or variant named
    twice, an include before its fragment, a fragment with variants included, or a choice
    on a flag its query does not declare is a ``ValueError``."""
    queries: dict[str, _Query] = {}
    for file_name, text in files:
        current: _Query | None = None
        for line in text.splitlines():
            match = _NAME.match(line)
            variants = _VARIANTS.match(line)
            include = _INCLUDE.match(line)
            if match:
                name = match.group(1)
                if name in queries:
                    raise ValueError(f"query {name!r} is defined twice ({file_name})")
                current = queries[name] = _Query([])
            elif current is None:
                continue
            elif variants:
                current.flags = tuple(flag.strip() for flag in variants.group(1).split(","))
            elif include:
                current.lines.extend(_included(queries, current, include, file_name))
            elif not line.lstrip().startswith("--"):
                current.lines.append(line)
    composed: dict[str, str] = {}
    for name, query in queries.items():
        for variant, sql in _variants(name, query):
            if variant in composed:
                raise ValueError(f"query {variant!r} is defined twice (a variant of {name!r})")
            composed[variant] = sql
    return composed


def _included(
    queries: dict[str, _Query], into: _Query, include: re.Match[str], file_name: str
) -> list[str | _Choice]:
    """An include line's replacement: the fragment's lines (re-indented), or a choice."""
    indent, condition, flag, included = include.groups()
    fragment = queries.get(included)
    if fragment is None:
        raise ValueError(f"{file_name} includes {included!r} before defining it")
    texts = [line for line in fragment.lines if isinstance(line, str)]
    if fragment.flags or len(texts) < len(fragment.lines):
        raise ValueError(f"{file_name} includes {included!r}, which has variants")
    body = "\n".join(texts).strip().splitlines()
    lines = tuple(indent + text for text in body)
    if condition is None:
        return list(lines)
    if flag not in into.flags:
        raise ValueError(f"{file_name}: {included!r} is included if {flag!r}, not a variant")
    return [_Choice(flag, condition == "if", lines)]


def _variants(name: str, query: _Query) -> list[tuple[str, str]]:
    """Each variant's name and text: every subset of the flags, fewest first."""
    found = []
    for chosen in product((False, True), repeat=len(query.flags)):
        # product varies the last flag fastest; reversed, the first flag varies fastest,
        # so the subsets come as (), (first,), (second,), (first, second), ...
        is_set = dict(zip(query.flags, reversed(chosen), strict=True))
        lines: list[str] = []
        for line in query.lines:
            if isinstance(line, _Choice):
                if is_set[line.flag] == line.wanted:
                    lines.extend(line.lines)
            else:
                lines.append(line)
        suffix = "".join(f"_{flag}" for flag in query.flags if is_set[flag])
        found.append((name + suffix, "\n".join(lines).strip()))
    return found


def schema_statements(backend: str) -> list[str]:
    """The ``schema_*`` statements, in the order they must run."""
    return [sql for name, sql in load(backend).items() if name.startswith("schema_")]
