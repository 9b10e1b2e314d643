"""Any value as JSON-ready builtins, every struct field kept: :func:`plain`.

The base of every JSON shape (:mod:`ledger.api.shaping`, and the feature namespaces' own
views). Pure: no I/O.
"""

from __future__ import annotations

from functools import cache
from typing import Any

import msgspec


@cache
def _field_names(struct_type: type[msgspec.Struct]) -> tuple[str, ...]:
    # msgspec.structs.fields builds its FieldInfo objects on every call: asked per struct of
    # every job of a page, it was most of the time a 50-job page took to shape (measured).
    return tuple(field.name for field in msgspec.structs.fields(struct_type))


def plain(value: Any) -> Any:
    """``value`` as JSON-ready builtins, keeping every struct field.

    ``msgspec.to_builtins`` honours the structs' ``omit_defaults``, which would drop e.g.
    ``status: pending`` and ``attempt: 0``: a JSON reader must not have to know the defaults.
    """
    if isinstance(value, msgspec.Struct):
        return {name: plain(getattr(value, name)) for name in _field_names(type(value))}
    if value is msgspec.UNSET:
        return None  # a field left out when unset (a definition's limits): null, "none"
    if isinstance(value, dict):
        return {str(key): plain(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [plain(item) for item in value]
    if value is msgspec.UNSET:  # a field never stored (a definition's rate): null to a reader
        return None
    return msgspec.to_builtins(value)
