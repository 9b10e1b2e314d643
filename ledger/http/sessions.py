"""The dashboard's browser sessions: a signed cookie naming a token, so a browser (which
cannot send a bearer header when it navigates) is held to that token's role and org.

The cookie holds ``<token id>.<expiry>.<mac>``, never the secret: the MAC is HMAC-SHA256
under a key this server process draws at start, checked with ``hmac.compare_digest``. A
session therefore ends when the server restarts, when it expires (:data:`SESSION_S`), or at
once when its token is revoked (the token is read again on every request)."""

from __future__ import annotations

import hashlib
import hmac
import secrets
from datetime import datetime
from uuid import UUID

COOKIE = "jobledger_session"
SESSION_S = 12 * 3600
"""How long a login lasts (then the login page asks for the token again)."""


class Sessions:
    """Issues and checks session cookies under one key (random unless given, for tests)."""

    def __init__(self, key: bytes | None = None) -> None:
        self._key = key or secrets.token_bytes(32)

    def _mac(self, body: str) -> str:
        return hmac.new(self._key, body.encode(), hashlib.sha256).hexdigest()

    def issue(self, token_id: UUID, now: datetime) -> str:
        body = f"{token_id}.{int(now.timestamp()) + SESSION_S}"
        return f"{body}.{self._mac(body)}"

    def token_of(self, cookie: str, now: datetime) -> UUID | None:
        """The token a cookie names, if this server signed it and it has not expired."""
        body, _, mac = cookie.rpartition(".")
        if not hmac.compare_digest(self._mac(body), mac):
            return None
        token_text, _, expiry = body.partition(".")
        if not expiry.isdigit() or int(expiry) <= now.timestamp():
            return None
        try:
            return UUID(token_text)
        except ValueError:
            return None
