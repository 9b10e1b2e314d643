"""The dashboard's browser sessions, and the one-time login codes ``serve`` prints.

A session is a row of this server process's memory: a random id, the SHA-256 of a random
secret, the token it stands for and its expiry. The cookie holds ``<id>.<secret>``, never
the token's secret; the server finds the row by the id and compares the hashes with
``hmac.compare_digest``. A session therefore ends when it is logged out (the row is
dropped: the old cookie is refused at once), when it expires (:data:`SESSION_S`), when the
server restarts (the memory is gone), or at once when its token is revoked (the token is
read again on every request).

Why memory and not the history: a session is this process's own state, never shared with
another process or replayed; what it grants is the token's, whose creation and revocation
are events. Logging out changes no state the ledger keeps, so it appends nothing.

A login code (:meth:`Sessions.login_code`) is the same kind of row for the link ``serve``
prints: good for one login within :data:`LOGIN_CODE_S`, so the link (unlike the token's
secret) is worth nothing once used or expired, and nothing after a restart."""

from __future__ import annotations

import hashlib
import hmac
import secrets
import threading
from dataclasses import dataclass
from datetime import datetime
from uuid import UUID

COOKIE = "jobledger_session"
SESSION_S = 12 * 3600
"""How long a login lasts (then the login page asks for the token again)."""
LOGIN_CODE_S = 600
"""How long a printed login link can be used (once)."""


@dataclass(frozen=True)
class _Grant:
    secret_sha256: bytes
    token_id: UUID
    expires_at: float


def _sha256(secret: str) -> bytes:
    return hashlib.sha256(secret.encode()).digest()


class _Grants:
    """Rows of ``<id>.<secret>`` credentials for tokens, each until its expiry."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._rows: dict[str, _Grant] = {}

    def add(self, token_id: UUID, expires_at: float, now: float) -> str:
        grant_id, secret = secrets.token_hex(16), secrets.token_urlsafe(32)
        with self._lock:
            # Drop the expired rows as new ones come: memory holds only the live ones.
            for stale in [k for k, row in self._rows.items() if row.expires_at <= now]:
                del self._rows[stale]
            self._rows[grant_id] = _Grant(_sha256(secret), token_id, expires_at)
        return f"{grant_id}.{secret}"

    def check(self, presented: str, now: float, *, drop: bool) -> UUID | None:
        """The token ``presented`` stands for, if it is a live row's (``drop``: end it)."""
        grant_id, _, secret = presented.partition(".")
        with self._lock:
            row = self._rows.get(grant_id)
            if row is None or not hmac.compare_digest(row.secret_sha256, _sha256(secret)):
                return None
            if drop or row.expires_at <= now:
                del self._rows[grant_id]
        return row.token_id if row.expires_at > now else None

    def __len__(self) -> int:
        with self._lock:
            return len(self._rows)


class Sessions:
    """This server's live sessions and unused login codes (see the module docstring)."""

    def __init__(self) -> None:
        self._sessions = _Grants()
        self._codes = _Grants()

    def issue(self, token_id: UUID, now: datetime) -> str:
        """A new session for ``token_id``: the cookie's value."""
        at = now.timestamp()
        return self._sessions.add(token_id, at + SESSION_S, at)

    def token_of(self, cookie: str, now: datetime) -> UUID | None:
        """The token a cookie's session stands for, if the session is live."""
        return self._sessions.check(cookie, now.timestamp(), drop=False)

    def end(self, cookie: str, now: datetime) -> None:
        """Log the session out: its cookie is refused from now on."""
        self._sessions.check(cookie, now.timestamp(), drop=True)

    @property
    def live(self) -> int:
        """How many sessions are held (some may have expired since the last login)."""
        return len(self._sessions)

    def login_code(self, token_id: UUID, now: datetime) -> str:
        """A code that logs in as ``token_id`` once, within :data:`LOGIN_CODE_S`."""
        at = now.timestamp()
        return self._codes.add(token_id, at + LOGIN_CODE_S, at)

    def redeem(self, code: str, now: datetime) -> UUID | None:
        """The token of a live login code, which is used up (a second try finds nothing)."""
        return self._codes.check(code, now.timestamp(), drop=True)
