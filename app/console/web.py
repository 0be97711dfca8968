"""What every console page shares: rendering, the error pages, the assets, the headers."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from litestar import Request, Response, get
from litestar.exceptions import (
    HTTPException,
    MethodNotAllowedException,
    NotFoundException,
    ValidationException,
)
from litestar.response import File, Template

from app.console.auth import COOKIE, CSRF_FIELD, SignInRequired, csrf_for, to_login
from app.lib.errors import AppError, NotFound, Unprocessable
from app.lib.request import validation_problem

HERE = Path(__file__).resolve().parent
TEMPLATES = HERE / "templates"
STATIC = HERE / "static"
ASSETS = {
    "console.css": "text/css; charset=utf-8",
    "console.js": "text/javascript; charset=utf-8",
    "chat.js": "text/javascript; charset=utf-8",
}
PAGE_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
    ),
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
}
NAV = (
    ("sessions", "/console", "Sessions"),
    ("memory", "/console/memory", "Memory"),
    ("search", "/console/search", "Search"),
    ("admin", "/console/admin", "Admin"),
)


def page(
    request: Request[Any, Any, Any],
    template: str,
    *,
    nav: str = "",
    status_code: int = 200,
    headers: dict[str, str] | None = None,
    **context: Any,
) -> Template:
    """A console page: `template` under templates/console/ with what the layout needs
    (the principal, the CSRF value of the forms, the navigation, a flash message from
    the `?done=` of a redirect)."""
    cookie = request.state.get("console_cookie", "")
    principal = request.state.get("principal")
    flash = request.query_params.get("done")
    return Template(
        template_name=f"console/{template}",
        context={
            "principal": principal,
            "csrf": csrf_for(cookie) if cookie else "",
            "csrf_field": CSRF_FIELD,
            "nav": [(key, href, label, key == nav) for key, href, label in NAV],
            "flash": flash[:200] if flash else None,
            **context,
        },
        status_code=status_code,
        headers=headers or PAGE_HEADERS,  # also on an error page the app's handlers render
    )


def _error_page(request: Request[Any, Any, Any], status: int, detail: str) -> Template:
    return page(request, "error.html", status_code=status, status=status, detail=detail)


def on_app_error(request: Request[Any, Any, Any], exc: AppError) -> Template:
    return _error_page(request, exc.status_code, exc.detail)


def on_http_error(request: Request[Any, Any, Any], exc: HTTPException) -> Template:
    detail = exc.detail if exc.status_code < 500 else "internal error"
    return _error_page(request, exc.status_code, detail)


def on_validation(request: Request[Any, Any, Any], exc: ValidationException) -> Template:
    """A parameter Litestar refused (`?limit=999`): the field named, as the API does."""
    status, detail = validation_problem(exc)
    return _error_page(request, status, detail)


def on_sign_in(request: Request[Any, Any, Any], _: SignInRequired) -> Response[Any]:
    response = to_login()
    if request.cookies.get(COOKIE):
        response.delete_cookie(COOKIE, path="/console")
    return response


EXCEPTION_HANDLERS: dict[Any, Any] = {
    SignInRequired: on_sign_in,
    AppError: on_app_error,
    # (the app's own handlers of these subclasses would answer JSON: name them here)
    ValidationException: on_validation,
    NotFoundException: on_http_error,
    MethodNotAllowedException: on_http_error,
    HTTPException: on_http_error,
}


@get("/static/{name:str}", opt={"console_public": True}, include_in_schema=False)
async def console_asset(name: str) -> File:
    media_type = ASSETS.get(name)
    if media_type is None:
        raise NotFound(f"no console asset {name!r}")
    return File(STATIC / name, media_type=media_type, content_disposition_type="inline")


def form_text(form: Any, name: str, *, limit: int, required: bool = True) -> str:
    """A form field's text, stripped; 422 naming the field when it is missing or long."""
    value = (form.get(name) or "").strip()
    if required and not value:
        raise Unprocessable(f"{name}: required")
    if len(value) > limit:
        raise Unprocessable(f"{name}: at most {limit} characters")
    if "\x00" in value:
        raise Unprocessable(f"{name}: NUL characters are not allowed")
    return value
