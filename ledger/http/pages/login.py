"""``/login`` and ``/logout``: a token's secret exchanged for a session cookie, and back.

The login link ``serve --print-login-link`` prints carries the secret in the URL's fragment
(``/login#token=…``), which a browser never sends: the login page's script moves it into
the form and posts it, so the secret reaches neither the server's access log nor the
history (the page then replaces its URL)."""

from __future__ import annotations

from typing import Annotated, Any

import msgspec
from litestar import Request, Response, get, post
from litestar.datastructures import Cookie
from litestar.enums import RequestEncodingType
from litestar.params import Body
from litestar.response import Redirect, Template

from ledger.api.ledger import Ledger
from ledger.http.sessions import COOKIE, SESSION_S, Sessions


class LoginForm(msgspec.Struct, frozen=True):
    token: str = ""


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
    token = ledger.authenticate(data.token.strip())
    if token is None:
        context = {"error": "that token is not valid (unknown, revoked or mistyped)"}
        return Template(template_name="login.html", context=context, status_code=401)
    value = sessions.issue(token.token_id, ledger.clock.now())
    return Redirect("/", status_code=303, cookies=[session_cookie(request, value, SESSION_S)])


@post("/logout", status_code=200, sync_to_thread=False)
def logout(request: Request[Any, Any, Any]) -> Response[str]:
    """End the session: the cookie is cleared and htmx sent to the login page."""
    return Response(
        "",
        headers={"HX-Redirect": "/login"},
        cookies=[session_cookie(request, "", 0)],
    )
