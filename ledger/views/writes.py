"""A view write: a named query and its parameters, produced by a projection's pure rules and
executed by the store on the unit of work's cursor, in order."""

from __future__ import annotations

from typing import Any, NamedTuple


class ViewWrite(NamedTuple):
    query: str
    params: dict[str, Any]
