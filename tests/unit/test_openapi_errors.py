"""The OpenAPI document lists each operation's error responses with the real body."""

from __future__ import annotations

import json

from app.asgi import create_app
from app.config import Settings
from app.lib.openapi import error_statuses


def _spec() -> dict:  # type: ignore[type-arg]
    app = create_app(
        Settings(database_url="postgresql+psycopg://nobody@127.0.0.1:1/none", log_level="error"),
        background_jobs=False,
    )
    return app.openapi_schema.to_schema()


def test_every_operation_documents_its_errors_with_the_error_body() -> None:
    spec = _spec()
    error = spec["components"]["schemas"]["Error"]
    assert error["required"] == ["error", "detail"]
    assert "status_code" not in json.dumps(spec)  # Litestar's own error shape is gone
    checked = 0
    for path, item in spec["paths"].items():
        for method, op in item.items():
            if method not in ("get", "post", "put", "patch", "delete"):
                continue
            codes = set(op["responses"])
            assert {"400", "422", "503"} <= codes, (method, path)
            if not path.startswith(("/health", "/shared", "/share")):
                assert {"401", "403", "404"} <= codes, (method, path)
            for code, response in op["responses"].items():
                if code.startswith(("4", "5")):
                    ref = response["content"]["application/json"]["schema"]["$ref"]
                    body = {
                        ("/health", "503"): "HealthOut",
                        ("/health/ready", "503"): "ReadyOut",
                    }.get((path, code), "Error")
                    assert ref.endswith(f"/{body}"), (method, path, code, ref)
            checked += 1
    assert checked > 40


def test_error_statuses_by_kind_of_route() -> None:
    assert error_statuses("GET", public=True, has_params=False) == ["400", "422", "503"]
    assert error_statuses("DELETE", public=False, has_params=True) == [
        "400",
        "401",
        "403",
        "404",
        "409",
        "422",
        "503",
    ]
    assert {"413", "415"} <= set(error_statuses("POST", public=False, has_params=True))


def test_the_turn_documents_the_models_refusal() -> None:
    """A model that refuses the request ends a JSON turn with 502 `llm_rejected`."""
    op = _spec()["paths"]["/sessions/{session_id}/turns"]["post"]
    assert op["responses"]["502"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/Error"
    }
    # and only the routes that call the model say so
    others = [
        (path, method)
        for path, item in _spec()["paths"].items()
        for method, o in item.items()
        if isinstance(o, dict) and "502" in o.get("responses", {})
    ]
    assert others == [("/sessions/{session_id}/turns", "post")]


def test_the_writers_of_session_files_document_507() -> None:
    paths = _spec()["paths"]
    for path in (
        "/sessions/{session_id}/files",
        "/sessions/{session_id}/share_file",
        "/sessions/{session_id}/messages",
        "/sessions/{session_id}/turns",
        "/me/import",
        "/me/import/chats",
    ):
        assert "507" in paths[path]["post"]["responses"], path
    assert "507" not in paths["/sessions/{session_id}/publish"]["post"]["responses"]
