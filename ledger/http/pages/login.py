"""``/login`` and ``/logout``: a token's secret (or a one-time login code) exchanged for a
session, and the session ended on the server.

The login link ``serve`` prints carries a one-time code, never the token's secret, in the
URL's fragment (``/login#code=…``), which a browser never sends: the login page's script
moves it into the form and posts it, so the code reaches neither the server's access log
nor the history (the page then replaces its URL); once used it logs no one in again."""

from __future__ import annotations

from typing import Annotated, Any

import msgspec
from litestar import Request, Response, get, post
from litestar.datastructures import Cookie
from litestar.enums import RequestEncodingType
from litestar.params import Body
from litestar.response import Redirect, Template

from ledger.api.ledger import Ledger
from ledger.core.tokens import TokenState
from ledger.http.auth import Credential
from ledger.http.sessions import COOKIE, SESSION_S, Sessions


class LoginForm(msgspec.Struct, frozen=True):
    token: str = ""
    code: str = ""


def _own_origin(request: Request[Any, Any, Any]) -> str:
    return f"{request.url.scheme}://{request.headers.get('host', '')}"


def session_cookie(request: Request[Any, Any, Any], value: str, max_age: int) -> Cookie:
    """HttpOnly (no script reads it), SameSite=Strict, ``Secure`` when served over https."""
    return Cookie(
        key=COOKIE,
        value=value,
        path="/",
        max_age=max_age,
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
    )


@get("/login", sync_to_thread=False)
def login_page() -> Template:
    """The form taking a token's secret."""
    return Template(template_name="login.html", context={"error": None})


@post("/login", sync_to_thread=True, status_code=303)
def login(
    request: Request[Any, Any, Any],
    ledger: Ledger,
    sessions: Sessions,
    data: Annotated[LoginForm, Body(media_type=RequestEncodingType.URL_ENCODED)],
) -> Response[Any]:
    """A valid secret gets a session cookie and the overview; anything else the form again
    (401). A post from another origin is refused (403): no one logs a browser in to their
    own token from their site."""
    origin = request.headers.get("origin")
    if origin is not None and origin != _own_origin(request):
        context = {"error": "a login must come from this server's own page"}
        return Template(template_name="login.html", context=context, status_code=403)
    token = _token_of(ledger, sessions, data)
    if token is None:
        reason = "unknown, revoked, used up or mistyped"
        context = {"error": f"that token or login link is not valid ({reason})"}
        return Template(template_name="login.html", context=context, status_code=401)
    value = sessions.issue(token.token_id, ledger.clock.now())
    return Redirect("/", status_code=303, cookies=[session_cookie(request, value, SESSION_S)])


def _token_of(ledger: Ledger, sessions: Sessions, data: LoginForm) -> TokenState | None:
    """The active token a login form's secret, or else its login code, stands for."""
    if data.token.strip():
        return ledger.tokens.authenticate(data.token.strip())
    token_id = sessions.redeem(data.code.strip(), ledger.clock.now())
    token = None if token_id is None else ledger.tokens.get(token_id)
    return token if token is not None and token.active else None


@post("/logout", status_code=200, sync_to_thread=False)
def logout(request: Request[Any, Any, Any], ledger: Ledger, sessions: Sessions) -> Response[str]:
    """End the session on the server (its cookie is refused from now on, wherever it was
    copied), clear the cookie and send htmx to the login page."""
    credential = request.auth
    if isinstance(credential, Credential) and credential.session is not None:
        sessions.end(credential.session, ledger.clock.now())
    return Response(
        "",
        headers={"HX-Redirect": "/login"},
        cookies=[session_cookie(request, "", 0)],
    )
