"""Running the app: uvicorn on one host and port, and the rule that keeps an open server on
loopback."""

from __future__ import annotations

import ipaddress
from collections.abc import Collection
from types import FrameType

import uvicorn

from ledger.api.ledger import Ledger
from ledger.core.errors import InvalidRequestError
from ledger.http.app import build_app
from ledger.http.event_hub import DEFAULT_POLL_S, EventHub
from ledger.http.hosts import is_ip_literal
from ledger.http.sessions import Sessions

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


class _Server(uvicorn.Server):
    """uvicorn's server, ending the open event streams as soon as it is asked to stop: it
    waits for every open response before the app's own shutdown, and a stream never ends by
    itself."""

    def __init__(self, config: uvicorn.Config, hub: EventHub) -> None:
        super().__init__(config)
        self._hub = hub

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        self._hub.close(wait=False)  # on the event loop: the app's shutdown joins it
        super().handle_exit(sig, frame)


def serve(
    ledger: Ledger,
    host: str = DEFAULT_HOST,
    port: int = DEFAULT_PORT,
    *,
    stream_poll_s: float = DEFAULT_POLL_S,
    sessions: Sessions | None = None,
    allowed_hosts: Collection[str] = (),
) -> None:
    """Serve ``ledger`` until interrupted (the caller closes it afterwards). The server
    answers to ``host`` when it is a name, to ``allowed_hosts``, ``localhost`` and any IP
    address (:mod:`ledger.http.hosts`)."""
    names = [*allowed_hosts, *([] if is_ip_literal(host) else [host])]
    app = build_app(ledger, stream_poll_s=stream_poll_s, sessions=sessions, allowed_hosts=names)
    hub: EventHub = app.state.event_hub
    config = uvicorn.Config(app, host=host, port=port, log_level="info", lifespan="on")
    _Server(config, hub).run()
