"""The ``Host`` header's check: a defence against DNS rebinding.

A page on another site can make a browser resolve its own name to 127.0.0.1 and then talk
to a dashboard on loopback as if it were that site (the browser sends the cookie only to
this origin, but the API's bearer routes and ``/health`` need none to be probed). The
browser still sends the name it resolved in ``Host``, so a name this server was not told
it answers to is refused (400, ``http.host_not_allowed``) before any route runs.

Allowed: any IP literal (a browser that sends one connected to that address: no name was
resolved, nothing was rebound), ``localhost``, the bound ``--host`` when it is a name, and
each ``--allowed-host``. A request with no ``Host`` (HTTP/1.0) passes: a browser always
sends one."""

from __future__ import annotations

import ipaddress
import json
import logging
from collections.abc import Iterable

from litestar.enums import ScopeType
from litestar.types import ASGIApp, Receive, Scope, Send

log = logging.getLogger(__name__)

ALWAYS = frozenset({"localhost"})


def host_name(header: str) -> str:
    """The name or address of a ``Host`` header, without its port or IPv6 brackets."""
    value = header.strip().lower()
    if value.startswith("["):
        return value[1:].partition("]")[0]
    return value.rpartition(":")[0] if value.count(":") == 1 else value


def is_ip_literal(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


class AllowedHosts:
    """Whether a ``Host`` header names this server (see the module docstring)."""

    def __init__(self, names: Iterable[str]) -> None:
        self.names = ALWAYS | {host_name(name) for name in names if name}

    def allows(self, header: str | None) -> bool:
        if header is None:
            return True
        name = host_name(header)
        return is_ip_literal(name) or name in self.names


def refusal(header: str) -> bytes:
    message = (
        f"this server does not answer to the host {header!r}: serve it with "
        "`--allowed-host NAME` if that is its name"
    )
    return json.dumps({"error": {"code": "http.host_not_allowed", "message": message}}).encode()


class HostCheck:
    """ASGI middleware refusing a request whose ``Host`` is not allowed (wrap it with
    ``DefineMiddleware(HostCheck, allowed=...)``)."""

    def __init__(self, app: ASGIApp, allowed: AllowedHosts) -> None:
        self.app = app
        self.allowed = allowed

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != ScopeType.HTTP:
            await self.app(scope, receive, send)
            return
        raw = dict(scope["headers"]).get(b"host")
        header = None if raw is None else raw.decode("latin-1")
        if self.allowed.allows(header):
            await self.app(scope, receive, send)
            return
        log.warning("refused a request for host %r (not an allowed host)", header)
        body = refusal(header or "")
        await send(
            {
                "type": "http.response.start",
                "status": 400,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body, "more_body": False})
