"""How the ledger's refusals read over HTTP: a status for each kind, the stable code kept.

The body is ``{"error": {"code": ..., "message": ...}}`` for every refusal the ledger makes,
so a client branches on the code (as a script branches on the CLI's ``error:`` line)."""

from __future__ import annotations

from typing import Any

from litestar import Request, Response
from litestar.exceptions import HTTPException, ValidationException

from ledger.core import errors
from ledger.core.workflows.errors import StepNotFoundError, WorkflowNotFoundError

STATUS_OF: tuple[tuple[type[errors.LedgerError], int], ...] = (
    (errors.JobNotFoundError, 404),
    (errors.DefinitionNotFoundError, 404),
    (errors.SourceNotFoundError, 404),
    (WorkflowNotFoundError, 404),
    (StepNotFoundError, 404),
    (errors.InvalidRequestError, 422),
    (errors.IdempotencyConflictError, 409),
    (errors.InvalidTransitionError, 409),
    (errors.LeaseOwnerMismatchError, 409),
    (errors.ConcurrencyConflictError, 409),
    (errors.DatabaseBusyError, 503),
    (errors.ReadOnlyDatabaseError, 503),
)
"""The first class an error is an instance of gives its status; any other ledger error is a
500 (the ledger's own fault, not the request's)."""


def error_body(code: str, message: str) -> dict[str, Any]:
    return {"error": {"code": code, "message": message}}


def status_of(error: errors.LedgerError) -> int:
    for cls, status in STATUS_OF:
        if isinstance(error, cls):
            return status
    return 500


def ledger_error(_: Request[Any, Any, Any], error: errors.LedgerError) -> Response[Any]:
    return Response(error_body(error.code, error.message), status_code=status_of(error))


def invalid_request(_: Request[Any, Any, Any], error: ValidationException) -> Response[Any]:
    """A parameter out of range or of the wrong type is 422 (Litestar says 400): the
    request was understood and is refused on its content, as the CLI's exit code 2."""
    body = error_body("request.invalid", str(error.detail))
    body["error"]["fields"] = error.extra
    return Response(body, status_code=422)


def http_error(_: Request[Any, Any, Any], error: HTTPException) -> Response[Any]:
    code = {401: "auth.unauthenticated", 403: "auth.forbidden", 404: "not_found"}.get(
        error.status_code, "http.error"
    )
    return Response(
        error_body(code, str(error.detail)),
        status_code=error.status_code,
        headers=error.headers,
    )
