"""The OpenAPI page at /schema, with no CDN: Swagger UI's scripts, styles and icon come
from the `swagger-ui-bundle` package (the copy connexion ships), served by the service
under `/static/swagger-ui/`. Offline, the page still works.

Litestar's default render plugins load their bundles from unpkg / jsdelivr; only Swagger
UI is offered (`/schema` and `/schema/swagger`), its URLs pointed at our copy, and the
YAML form of the document (`/schema/openapi.yaml`) next to the JSON one.
"""

from __future__ import annotations

from litestar.openapi import OpenAPIConfig
from litestar.openapi.plugins import SwaggerRenderPlugin, YamlRenderPlugin
from litestar.router import Router
from litestar.static_files import create_static_files_router
from swagger_ui_bundle import swagger_ui_path

SWAGGER_STATIC = "/static/swagger-ui"


def openapi_config(title: str, version: str) -> OpenAPIConfig:
    swagger = SwaggerRenderPlugin(
        js_url=f"{SWAGGER_STATIC}/swagger-ui-bundle.js",
        css_url=f"{SWAGGER_STATIC}/swagger-ui.css",
        standalone_preset_js_url=f"{SWAGGER_STATIC}/swagger-ui-standalone-preset.js",
        favicon=f"<link rel='icon' type='image/png' href='{SWAGGER_STATIC}/favicon-32x32.png'>",
        path="/swagger",
    )
    yaml = YamlRenderPlugin(path=["/openapi.yaml", "/openapi.yml"])
    return OpenAPIConfig(
        title=title, version=version, path="/schema", render_plugins=[swagger, yaml]
    )


def swagger_static_router() -> Router:
    """GET /static/swagger-ui/{file}: the package's files, public (the page is)."""
    return create_static_files_router(
        path=SWAGGER_STATIC,
        directories=[str(swagger_ui_path)],
        name="swagger-ui",
        opt={"public": True},
    )
