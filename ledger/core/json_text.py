"""JSON text whose objects name a key twice is refused, not resolved to the last value.

``{"amount": 1, "amount": 100}`` means different things to different readers (most keep the
last, some the first, a signature checker may have seen the other one), so a payload, spec or
output given as JSON text must say each key once. msgspec, which decodes the text, keeps the
last silently and cannot report it; :func:`duplicate_key` reads the text a second time with
the standard library's decoder, whose ``object_pairs_hook`` sees every pair. The doors that
take JSON text (the CLI's payloads, workflow specs and outputs; the HTTP API's bodies) call it
after their own decoding succeeded, so their messages for malformed text are unchanged.

Cost: nothing for text with fewer than two ``:`` (no object can hold two keys), else about
one extra standard-library decode (~2x msgspec's time). Pure: no I/O.
"""

from __future__ import annotations

import json
from typing import Any


class _RepeatedKeyError(Exception):
    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def _unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _RepeatedKeyError(key)
            seen.add(key)
    return obj


def _constant(name: str) -> None:
    return None  # NaN and Infinity: the door's own decoder refuses them; keep reading


def duplicate_key(text: bytes | str) -> str | None:
    """The first key that an object of the JSON ``text`` names twice, or ``None`` when every
    object's keys are unique (or when the text is not JSON this decoder reads: its door
    decoded it already and says what is wrong with it)."""
    colon = b":" if isinstance(text, bytes) else ":"
    if text.count(colon) < 2:  # type: ignore[arg-type]  # bytes with bytes, str with str
        return None
    try:
        json.loads(text, object_pairs_hook=_unique, parse_constant=_constant)
    except _RepeatedKeyError as repeated:
        return repeated.key
    except (ValueError, RecursionError):
        return None
    return None


def duplicate_key_message(what: str, key: str) -> str:
    """How a door says it: ``<what> names the key 'amount' twice in one object``."""
    shown = repr(key) if len(key) <= 80 else repr(key[:80]) + "…"
    return f"{what} names the key {shown} twice in one object (JSON keys must be unique)"
