"""The door every JSON request body comes through: a body nested too deep to decode is a
422 in the documented error shape (``request.invalid``), logged, never a 500.

msgspec decodes recursively and raises ``RecursionError`` past about a thousand levels
(the CLI refuses the same input the same way, ``cli/params.py``); shallower bodies are
decoded and then held to :data:`~ledger.core.limits.MAX_JSON_DEPTH` where they are
payloads."""

from __future__ import annotations

import logging
from typing import Any

from litestar import Request
from litestar.exceptions import ValidationException

from ledger.core.limits import MAX_JSON_DEPTH

log = logging.getLogger(__name__)


class LedgerRequest(Request[Any, Any, Any]):
    """Litestar's request, its JSON body decoded behind the depth refusal."""

    async def json(self) -> Any:
        try:
            return await super().json()
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
