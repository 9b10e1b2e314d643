"""Running the app: uvicorn on one host and port, and the rule that keeps an open server on
loopback."""

from __future__ import annotations

import ipaddress

import uvicorn

from ledger.api.ledger import Ledger
from ledger.core.errors import InvalidRequestError
from ledger.http.app import build_app

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8765


def is_loopback(host: str) -> bool:
    """Whether ``host`` binds only this machine's loopback (``localhost``, 127/8, ``::1``)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a name other than localhost may resolve anywhere


def check_binding(host: str, *, tokens_configured: bool) -> None:
    """Refuse a non-loopback ``host`` while no token is active: the server would accept no
    request but /health, and an operator who meant to open it has forgotten the token."""
    if not tokens_configured and not is_loopback(host):
        raise InvalidRequestError(
            f"refusing to serve on {host}: no token is configured; create one (`jobledger "
            "token create`, or `serve --token-file F`) or serve on 127.0.0.1"
        )


def serve(ledger: Ledger, host: str = DEFAULT_HOST, port: int = DEFAULT_PORT) -> None:
    """Serve ``ledger`` until interrupted (the caller closes it afterwards)."""
    uvicorn.run(build_app(ledger), host=host, port=port, log_level="info", lifespan="on")
