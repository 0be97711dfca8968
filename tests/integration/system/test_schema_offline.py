"""/schema works offline: the page's scripts, styles and icon come from the service
(app/lib/docs_ui.py, the `swagger-ui-bundle` package), none from a CDN."""

from __future__ import annotations

import re

from litestar.testing import AsyncTestClient

ASSET = re.compile(r"""(?:src|href)\s*=\s*["']([^"']+)["']""")


async def test_schema_page_loads_everything_from_the_service(anon_client: AsyncTestClient) -> None:
    for page in ("/schema", "/schema/swagger"):
        r = await anon_client.get(page, headers={"Authorization": ""})
        assert r.status_code == 200 and "SwaggerUIBundle" in r.text
        assets = ASSET.findall(r.text)
        assert len(assets) >= 4, assets  # css, the bundle, the preset, the icon
        external = [a for a in assets if not a.startswith("/") or a.startswith("//")]
        assert external == [], f"{page} loads {external}"
        for url in assets:
            got = await anon_client.get(url, headers={"Authorization": ""})
            assert got.status_code == 200 and len(got.content) > 500, url
    css = await anon_client.get("/static/swagger-ui/swagger-ui.css")
    assert css.headers["content-type"].startswith("text/css")


async def test_static_files_stay_inside_the_package(anon_client: AsyncTestClient) -> None:
    r = await anon_client.get("/static/swagger-ui/..%2f..%2f__init__.py")
    assert r.status_code == 404
