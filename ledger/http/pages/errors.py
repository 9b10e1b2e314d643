"""How refusals read on the dashboard: an HTML page with the same status and stable code
as the API's JSON, and a login page instead of a 401 (htmx gets ``HX-Redirect`` to it)."""

from __future__ import annotations

from typing import Any

from litestar import Request, Response
from litestar.exceptions import HTTPException, ValidationException
from litestar.response import Redirect, Template

from ledger.core.errors import LedgerError
from ledger.http.errors import status_of

CODES = {401: "auth.unauthenticated", 403: "auth.forbidden", 404: "not_found"}


def page_error(request: Request[Any, Any, Any], error: Exception) -> Response[Any]:
    if isinstance(error, LedgerError):
        status, code, message = status_of(error), error.code, error.message
    elif isinstance(error, ValidationException):
        status, code, message = 422, "request.invalid", str(error.detail)
    elif isinstance(error, HTTPException):
        status = error.status_code
        code, message = CODES.get(status, "http.error"), str(error.detail)
    else:
        raise error
    if status == 401:
        if request.headers.get("hx-request") == "true":
            return Response("", status_code=401, headers={"HX-Redirect": "/login"})
        return Redirect("/login", status_code=303)
    context = {"status": status, "code": code, "message": message}
    return Template(template_name="error.html", context=context, status_code=status)
