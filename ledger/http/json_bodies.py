"""The API's JSON bodies say each key once: ``{"type": "t", "type": "u"}`` is 422
``request.invalid`` naming the key, as the CLI refuses it, instead of the last value silently
winning (:mod:`ledger.core.json_text` says why and what it costs).

A ``before_request`` hook of the API router: it reads the body (Litestar keeps it for the
handler's own decoding) and checks it before any handler decodes it."""

from __future__ import annotations

from typing import Any

from litestar import Request

from ledger.core.errors import InvalidRequestError
from ledger.core.json_text import duplicate_key, duplicate_key_message

_WITH_BODY = frozenset({"POST", "PUT", "PATCH"})


async def refuse_duplicate_keys(request: Request[Any, Any, Any]) -> None:
    """Raise ``request.invalid`` when the body is JSON in which an object names a key
    twice; let every other request through (``None``: go on to the handler)."""
    if request.method not in _WITH_BODY:
        return
    body = await request.body()
    key = duplicate_key(body) if body else None
    if key is not None:
        raise InvalidRequestError(duplicate_key_message("the request body", key))
