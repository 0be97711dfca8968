"""CORS_ALLOW_ORIGINS: off by default; when set, Litestar's CORS answers preflights
without a token and marks allowed origins on real responses."""

from __future__ import annotations

import pytest

from app.config import Settings, SettingsError, load_settings
from tests.conftest import ADMIN_TOKEN

ORIGIN = "https://app.example.com"
PREFLIGHT = {
    "Origin": ORIGIN,
    "Access-Control-Request-Method": "POST",
    "Access-Control-Request-Headers": "authorization, content-type",
}


async def test_preflight_needs_no_token(make_client, settings: Settings) -> None:  # type: ignore[no-untyped-def]
    async with make_client(settings, cors_allow_origins=f"{ORIGIN}, http://localhost:5173") as c:
        r = await c.options("/sessions", headers=PREFLIGHT)
        assert r.status_code == 204, r.text
        assert r.headers["access-control-allow-origin"] == ORIGIN
        assert "POST" in r.headers["access-control-allow-methods"]
        assert r.headers["x-content-type-options"] == "nosniff"  # answered before routing
        assert "authorization" in r.headers["access-control-allow-headers"].lower()
        # a real request from the origin: still needs its token, and is marked for it
        r = await c.get("/me", headers={"Origin": ORIGIN})
        assert r.status_code == 401
        r = await c.get("/me", headers={"Origin": ORIGIN, "Authorization": f"Bearer {ADMIN_TOKEN}"})
        assert r.status_code == 200
        assert r.headers["access-control-allow-origin"] == ORIGIN
        assert "x-request-id" in r.headers["access-control-expose-headers"].lower()
        # an origin not on the list is not allowed
        r = await c.options("/sessions", headers={**PREFLIGHT, "Origin": "https://evil.example"})
        assert r.status_code == 400
        assert "access-control-allow-origin" not in r.headers
        r = await c.get("/health", headers={"Origin": "https://evil.example"})
        assert "access-control-allow-origin" not in r.headers


async def test_cors_is_off_by_default(make_client, settings: Settings) -> None:  # type: ignore[no-untyped-def]
    assert settings.cors_allow_origins == ""
    async with make_client(settings) as c:
        r = await c.options("/sessions", headers=PREFLIGHT)
        # no CORS headers: a browser refuses the cross-origin call; no token is asked for
        assert r.status_code == 204
        assert "access-control-allow-origin" not in r.headers
        r = await c.get("/health", headers={"Origin": ORIGIN})
        assert "access-control-allow-origin" not in r.headers


def test_origins_are_validated() -> None:
    s = load_settings({"CORS_ALLOW_ORIGINS": "https://a.example/, http://localhost:5173"})
    assert s.cors_origins == ("https://a.example", "http://localhost:5173")
    assert load_settings({"CORS_ALLOW_ORIGINS": "*"}).cors_origins == ("*",)
    for bad in ("a.example", "https://a.example/path", "ftp://a.example"):
        with pytest.raises(SettingsError, match="CORS_ALLOW_ORIGINS"):
            load_settings({"CORS_ALLOW_ORIGINS": bad})
