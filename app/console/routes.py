"""The console's router: every page under /console, behind `console_guard`."""

from __future__ import annotations

from litestar import Router

from app.console.admin import AdminPage
from app.console.auth import console_guard
from app.console.chat import ChatPage
from app.console.chat_import import ChatImportForm
from app.console.memory import MemoryPage
from app.console.rolling import RollingSummaryForm
from app.console.search import SearchPage
from app.console.session_page import SessionPage
from app.console.sessions import SessionListPage
from app.console.signin import SignInController, SignOutController
from app.console.web import EXCEPTION_HANDLERS, PAGE_HEADERS, console_asset

PAGES: list[object] = [
    SignInController,
    SignOutController,
    SessionListPage,
    SessionPage,
    ChatPage,
    RollingSummaryForm,
    ChatImportForm,
    MemoryPage,
    SearchPage,
    AdminPage,
    console_asset,
]


def console_router() -> Router:
    return Router(
        path="/console",
        route_handlers=PAGES,  # type: ignore[arg-type]
        guards=[console_guard],
        opt={"own_auth": True},
        exception_handlers=EXCEPTION_HANDLERS,
        response_headers=PAGE_HEADERS,
        include_in_schema=False,
    )
