"""Error responses: clear 4xx messages for bad input, and never a stack trace for a server fault."""
from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from environments.errors import EnvError
from reward_service.logs import request_id_var

log = logging.getLogger(__name__)


class ApiError(Exception):
    """A client error with a status code, a message, and optionally where in the body it was found."""

    def __init__(self, status_code: int, message: str, loc: list[Any] | None = None,
                 headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status_code = status_code
        self.message = message
        self.loc = loc
        self.headers = headers


def _clean_errors(errors: list[dict[str, Any]]) -> list[dict[str, Any]]:
    # Drop the echoed input (it can be megabytes of rollout text) and keep what a person needs to fix the call.
    return [{"loc": list(e.get("loc", ())), "msg": e.get("msg", ""), "type": e.get("type", "")} for e in errors]


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(RequestValidationError)
    async def _validation(_: Request, exc: RequestValidationError) -> JSONResponse:
        errors = _clean_errors(list(exc.errors()))
        if any(e["type"] == "json_invalid" for e in errors):
            return JSONResponse({"detail": "request body is not valid JSON", "errors": errors,
                                 "request_id": request_id_var.get()}, status_code=400)
        summary = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in errors[:5])
        return JSONResponse({"detail": f"invalid request: {summary}", "errors": errors,
                             "request_id": request_id_var.get()}, status_code=422)

    @app.exception_handler(ApiError)
    async def _api_error(_: Request, exc: ApiError) -> JSONResponse:
        body: dict[str, Any] = {"detail": exc.message, "request_id": request_id_var.get()}
        if exc.loc is not None:
            body["loc"] = exc.loc
        return JSONResponse(body, status_code=exc.status_code, headers=exc.headers)

    @app.exception_handler(EnvError)
    async def _env_error(_: Request, exc: EnvError) -> JSONResponse:
        headers = {"Retry-After": str(exc.details["retry_after_s"])} if "retry_after_s" in exc.details else None
        return JSONResponse({"error": exc.body(), "detail": exc.message, "code": exc.code,
                             "request_id": request_id_var.get()}, status_code=exc.http_status, headers=headers)

    @app.exception_handler(StarletteHTTPException)
    async def _http(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        if exc.status_code == 400 and "digits" in str(exc.__cause__ or ""):  # FastAPI's "error parsing the body"
            why = str(exc.__cause__).split(";")[0]  # Python's int-to-text limit: 4,300 digits
            return JSONResponse({"detail": f"a number in the body cannot be read ({why}); send such a value as a "
                                           "string", "request_id": request_id_var.get()}, status_code=422)
        return JSONResponse({"detail": exc.detail, "request_id": request_id_var.get()}, status_code=exc.status_code,
                            headers=getattr(exc, "headers", None))

    @app.exception_handler(Exception)
    async def _unexpected(_: Request, exc: Exception) -> JSONResponse:
        log.exception("unhandled error")
        return JSONResponse(
            {"detail": "internal server error", "request_id": request_id_var.get()}, status_code=500
        )
