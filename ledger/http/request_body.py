"""The door every JSON request body comes through: a body nested too deep to decode, or one
whose object names a key twice (``{"type": "t", "type": "u"}``, see
:mod:`ledger.core.json_text`), is a 422 in the documented error shape (``request.invalid``),
logged, never a 500 nor the last value silently winning.

msgspec decodes recursively and raises ``RecursionError`` past about a thousand levels
(the CLI refuses the same input the same way, ``cli/params.py``); shallower bodies are
decoded and then held to :data:`~ledger.core.limits.MAX_JSON_DEPTH` where they are
payloads."""

from __future__ import annotations

import logging
from typing import Any

from litestar import Request
from litestar.exceptions import ValidationException

from ledger.core.errors import InvalidRequestError
from ledger.core.json_text import duplicate_key, duplicate_key_message
from ledger.core.limits import MAX_JSON_DEPTH

log = logging.getLogger(__name__)


class LedgerRequest(Request[Any, Any, Any]):
    """Litestar's request, its JSON body decoded behind the depth and repeated-key
    refusals."""

    async def json(self) -> Any:
        try:
            decoded = await super().json()
        except RecursionError:
            log.warning(
                "refused %s %s: its JSON body is nested too deep to decode",
                self.method,
                self.url.path,
            )
            raise ValidationException(
                f"the JSON body is nested too deep to decode (a payload may nest "
                f"{MAX_JSON_DEPTH} levels)"
            ) from None
        # After the decode, so that malformed text keeps the decoder's own message.
        key = duplicate_key(await self.body())
        if key is not None:
            log.warning("refused %s %s: its JSON body repeats a key", self.method, self.url.path)
            raise InvalidRequestError(duplicate_key_message("the request body", key))
        return decoded
