from __future__ import annotations

import os
from pathlib import Path

from litestar.testing import AsyncTestClient

from app.config import Settings
from tests.conftest import new_user
from tests.unit.compression.images import png


async def _session(client: AsyncTestClient, headers=None) -> str:  # type: ignore[no-untyped-def]
    r = await client.post("/sessions", json={"profile_id": "default"}, headers=headers)
    assert r.status_code == 201, r.text
    return r.json()["id"]


def _dir(settings: Settings, sid: str) -> Path:
    return settings.data_path / "session_files" / sid


def _visible(directory: Path) -> list[str]:
    return sorted(os.listdir(directory)) if directory.exists() else []


async def _upload(client: AsyncTestClient, sid: str, files, headers=None):  # type: ignore[no-untyped-def]
    return await client.post(f"/sessions/{sid}/files", files=files, headers=headers)


async def test_upload_list_download(client: AsyncTestClient, settings: Settings) -> None:
    sid = await _session(client)
    r = await _upload(
        client,
        sid,
        [
            ("files", ("report.pdf", b"%PDF-1.7\n%...", "application/pdf")),
            ("files", ("notes.txt", "grüße\n".encode(), "text/plain")),
        ],
    )
    assert r.status_code == 201, r.text
    body = r.json()
    assert [f["name"] for f in body["files"]] == ["report.pdf", "notes.txt"]
    assert body["files"][0]["type"] == "pdf" and body["files"][0]["size"] == 13
    assert body["files"][1]["path"] == f"session_files/{sid}/notes.txt"
    assert body["message_block"] == (
        "[Uploaded files on disk:\n"
        f"- report.pdf → session_files/{sid}/report.pdf\n"
        f"- notes.txt → session_files/{sid}/notes.txt]"
    )
    assert (_dir(settings, sid) / "notes.txt").read_bytes() == "grüße\n".encode()

    listing = (await client.get(f"/sessions/{sid}/files?limit=1")).json()
    assert listing["total"] == 2 and listing["has_more"] is True
    assert [f["name"] for f in listing["items"]] == ["notes.txt"]
    listing = (await client.get(f"/sessions/{sid}/files?limit=1&offset=1")).json()
    assert [f["name"] for f in listing["items"]] == ["report.pdf"]

    r = await client.get(f"/sessions/{sid}/files/notes.txt")
    assert r.status_code == 200 and r.content == "grüße\n".encode()
    assert r.headers["content-type"] == "text/plain; charset=utf-8"
    assert r.headers["x-content-type-options"] == "nosniff"
    assert r.headers["content-disposition"].startswith("inline")


async def test_duplicate_names_get_a_suffix(client: AsyncTestClient, settings: Settings) -> None:
    sid = await _session(client)
    r = await _upload(
        client, sid, [("files", ("a.txt", b"1", "text/plain")), ("files", ("a.txt", b"2", "x"))]
    )
    assert [f["name"] for f in r.json()["files"]] == ["a.txt", "a_1.txt"]
    r = await _upload(client, sid, [("files", ("a.txt", b"3", "text/plain"))])
    stored = r.json()["files"][0]
    assert stored["name"] == "a_2.txt" and stored["original_name"] == "a.txt"
    assert f"- a.txt → session_files/{sid}/a_2.txt]" in r.json()["message_block"]
    d = _dir(settings, sid)
    assert [(d / n).read_bytes() for n in ("a.txt", "a_1.txt", "a_2.txt")] == [b"1", b"2", b"3"]


async def test_odd_and_traversing_names_are_sanitised(
    client: AsyncTestClient, settings: Settings
) -> None:
    sid = await _session(client)
    names = [
        "../../escape.txt",
        "/etc/passwd",
        "..",
        " . ",
        "we\u202eird\u200b.md",
        "x" * 300 + ".csv",
    ]
    stored = []
    for raw in names:
        r = await _upload(client, sid, [("files", (raw, b"data", "text/plain"))])
        assert r.status_code == 201, (raw, r.text)
        stored.append(r.json()["files"][0]["name"])
    assert stored[:5] == ["escape.txt", "passwd", "file", "file_1", "weird.md"]
    assert stored[5].endswith(".csv") and len(stored[5].encode()) <= 200
    root = settings.data_path
    assert not (root / "escape.txt").exists() and not (root.parent / "escape.txt").exists()
    assert sorted(_visible(_dir(settings, sid))) == sorted(stored)
    # filename="" with content (httpx omits an empty name: send the body by hand)
    body = (
        b'--b\r\nContent-Disposition: form-data; name="files"; filename=""\r\n\r\nabc\r\n'
        b'--b\r\nContent-Disposition: form-data; name="files"; filename=""\r\n\r\n\r\n'
        b"--b--\r\n"
    )
    r = await client.post(
        f"/sessions/{sid}/files",
        content=body,
        headers={"Content-Type": "multipart/form-data; boundary=b"},
    )
    assert r.status_code == 201, r.text
    assert [f["name"] for f in r.json()["files"]] == ["file_2"]  # the empty input is skipped
    # RFC 5987 names (filename*=utf-8'')
    body = (
        b"--b\r\nContent-Disposition: form-data; name=files; "
        b"filename*=utf-8''%E2%82%AC%20rates.txt\r\n\r\n1\r\n--b--\r\n"
    )
    r = await client.post(
        f"/sessions/{sid}/files",
        content=body,
        headers={"Content-Type": "multipart/form-data; boundary=b"},
    )
    assert r.json()["files"][0]["name"] == "€ rates.txt"


async def test_download_traversal_and_unknown_names_are_404(
    client: AsyncTestClient, settings: Settings
) -> None:
    sid = await _session(client)
    await _upload(client, sid, [("files", ("a.txt", b"x", "text/plain"))])
    # a secret next to the session directory
    (settings.data_path / "secret.txt").write_text("s")
    for name in (
        "..%2F..%2Fsecret.txt",
        "%2E%2E",
        ".images.json",
        "missing.txt",
        "..%5C..%5Csecret.txt",
    ):
        r = await client.get(f"/sessions/{sid}/files/{name}")
        assert r.status_code == 404, (name, r.status_code)
    r = await client.get(f"/sessions/{sid}/files/a.txt%00")  # a NUL in a path segment
    assert r.status_code == 422 and r.json()["detail"].startswith("filename: "), r.text
    r = await client.get(f"/sessions/{sid}/files/../../secret.txt")
    assert r.status_code == 404


async def test_over_the_limit_is_413_and_leaves_nothing(make_client, settings: Settings) -> None:  # type: ignore[no-untyped-def]
    from tests.conftest import ADMIN_TOKEN

    async with make_client(settings, session_files_max_size_mb=1) as c:
        c.headers["Authorization"] = f"Bearer {ADMIN_TOKEN}"
        sid = await _session(c)
        big = b"x" * (1024 * 1024 + 1)
        r = await _upload(
            c,
            sid,
            [("files", ("ok.txt", b"small", "text/plain")), ("files", ("big.txt", big, "x"))],
        )
        assert r.status_code == 413, r.text
        assert "big.txt" in r.json()["detail"] and "SESSION_FILES_MAX_SIZE_MB" in r.json()["detail"]
        d = _dir(settings, sid)
        assert _visible(d) == []  # neither the big file, its temp, nor the earlier one
        exact = b"y" * (1024 * 1024)
        r = await _upload(c, sid, [("files", ("exact.bin.txt", exact, "text/plain"))])
        assert r.status_code == 201 and r.json()["files"][0]["size"] == len(exact)


async def test_announced_oversized_body_is_refused_before_reading(
    client: AsyncTestClient,
) -> None:
    sid = await _session(client)
    r = await client.post(
        f"/sessions/{sid}/files",
        content=b"--b\r\n",
        headers={
            "Content-Type": "multipart/form-data; boundary=b",
            "Content-Length": str(50 * 1024**3),
        },
    )
    assert r.status_code == 413 and "request body" in r.json()["detail"]


async def test_large_upload_is_streamed_past_the_json_body_limit(
    make_client, settings: Settings
) -> None:  # type: ignore[no-untyped-def]
    """MAX_REQUEST_BODY_MB (JSON) does not cap uploads: they have their own limit."""
    from tests.conftest import ADMIN_TOKEN

    async with make_client(settings, max_request_body_mb=1, session_files_max_size_mb=4) as c:
        c.headers["Authorization"] = f"Bearer {ADMIN_TOKEN}"
        sid = await _session(c)
        payload = b"D" + os.urandom(3 * 1024 * 1024 - 1)  # no executable signature by chance
        r = await _upload(c, sid, [("files", ("blob.dat", payload, "application/octet-stream"))])
        assert r.status_code == 201, r.text
        assert (_dir(settings, sid) / "blob.dat").read_bytes() == payload
        r = await c.get(f"/sessions/{sid}/files/blob.dat")
        assert r.content == payload
        assert r.headers["content-type"] == "application/octet-stream"
        assert r.headers["content-disposition"].startswith("attachment")


async def test_executables_are_refused_by_extension_and_content(
    client: AsyncTestClient, settings: Settings
) -> None:
    sid = await _session(client)
    cases = [
        ("run.sh", b"echo hi\n", "extension .sh"),
        ("tool.EXE", b"hello", "extension .exe"),
        ("script.py", b"print(1)\n", "extension .py"),
        ("innocent.txt", b"\x7fELF\x02\x01\x01" + bytes(100), "ELF"),
        ("readme.md", b"#!/bin/bash\nrm -rf /\n", "#!"),
        ("photo.jpg", b"\xcf\xfa\xed\xfe" + bytes(100), "Mach-O"),
        ("lib.dat", b"\xca\xfe\xba\xbe" + bytes(100), "universal"),
        ("doc.pdf", b"MZ\x90\x00\x03" + bytes(59) + b"\x00" * 200, "MZ"),
    ]
    for name, data, why in cases:
        r = await _upload(client, sid, [("files", (name, data, "application/octet-stream"))])
        assert r.status_code == 415, (name, r.status_code)
        detail = r.json()["detail"]
        assert name.lower() in detail.lower() and why in detail and "executable" in detail, detail
    # content found only past the first network chunk is still judged on its head
    r = await _upload(
        client, sid, [("files", ("big.txt", b"\x7fELF" + b"\x00" * 300_000, "text/plain"))]
    )
    assert r.status_code == 415
    assert _visible(_dir(settings, sid)) == []
    # text that merely starts with MZ is fine
    r = await _upload(client, sid, [("files", ("cc.csv", b"MZ,Mozambique\n", "text/csv"))])
    assert r.status_code == 201


async def test_bad_requests(client: AsyncTestClient) -> None:
    sid = await _session(client)
    r = await client.post(f"/sessions/{sid}/files", json={"files": []})
    assert r.status_code == 415 and "multipart" in r.json()["detail"]
    r = await client.post(f"/sessions/{sid}/files", data={"field": "value"})
    assert r.status_code == 415  # urlencoded, not multipart
    r = await client.post(
        f"/sessions/{sid}/files",
        content=b'--b\r\nContent-Disposition: form-data; name="a"\r\n\r\nv\r\n--b--\r\n',
        headers={"Content-Type": "multipart/form-data; boundary=b"},
    )
    assert r.status_code == 422 and "no file" in r.json()["detail"]
    r = await client.post(
        f"/sessions/{sid}/files",
        content=b'--b\r\nContent-Disposition: form-data; name="f"; filename="a.txt"\r\n\r\nv',
        headers={"Content-Type": "multipart/form-data; boundary=b"},
    )
    assert r.status_code == 400 and "incomplete" in r.json()["detail"]
    unknown = "00000000-0000-0000-0000-000000000000"
    r = await _upload(client, unknown, [("files", ("a.txt", b"x", "text/plain"))])
    assert r.status_code == 404


async def test_content_types_and_active_content(client: AsyncTestClient) -> None:
    sid = await _session(client)
    files = [
        ("files", ("image.txt", png(8, 8), "text/plain")),
        ("files", ("page.html", b"<script>alert(document.cookie)</script>", "text/html")),
        ("files", ("logo.svg", b"<svg onload='alert(1)'/>", "image/svg+xml")),
        ("files", ("code.ts", b"let a: number = 1\n", "video/mp2t")),
        ("files", ("stream.ts", b"".join(b"\x47" + bytes(187) for _ in range(4)), "x")),
        ("files", ("model.stl", b"solid m\nendsolid m\n", "x")),
    ]
    r = await _upload(client, sid, files)
    assert r.status_code == 201, r.text
    types = {f["name"]: (f["content_type"], f["type"]) for f in r.json()["files"]}
    assert types == {
        "image.txt": ("image/png", "image"),
        "page.html": ("text/html", "html"),
        "logo.svg": ("image/svg+xml", "svg"),
        "code.ts": ("text/plain", "text"),
        "stream.ts": ("video/mp2t", "video"),
        "model.stl": ("model/stl", "model"),
    }
    r = await client.get(f"/sessions/{sid}/files/image.txt")
    assert r.headers["content-type"] == "image/png"
    for name in ("page.html", "logo.svg"):
        r = await client.get(f"/sessions/{sid}/files/{name}")
        assert r.headers["x-content-type-options"] == "nosniff"
        assert r.headers["content-disposition"].startswith("attachment")
        assert "sandbox" in r.headers["content-security-policy"]
        assert "default-src 'none'" in r.headers["content-security-policy"]


async def test_other_users_cannot_reach_files(client: AsyncTestClient) -> None:
    _, alice = await new_user(client, "alice")
    _, bob = await new_user(client, "bob")
    sid = await _session(client, headers=alice)
    r = await _upload(client, sid, [("files", ("a.txt", b"x", "text/plain"))], headers=alice)
    assert r.status_code == 201
    for method, path, kwargs in [
        ("GET", f"/sessions/{sid}/files", {}),
        ("GET", f"/sessions/{sid}/files/a.txt", {}),
        ("POST", f"/sessions/{sid}/files", {"files": [("files", ("b.txt", b"y", "x"))]}),
        ("POST", f"/sessions/{sid}/publish", {"json": {"filename": "a.txt"}}),
        ("POST", f"/sessions/{sid}/share_file", {"json": {"path": "/etc/hosts"}}),
    ]:
        r = await client.request(method, path, headers=bob, **kwargs)
        assert r.status_code == 404, (method, path, r.status_code)


async def test_publish_card(client: AsyncTestClient) -> None:
    sid = await _session(client)
    await _upload(client, sid, [("files", ("shot.png", png(4, 4), "image/png"))])
    r = await client.post(f"/sessions/{sid}/publish", json={"filename": "shot.png"})
    assert r.status_code == 200, r.text
    assert r.json() == {
        "type": "image",
        "content_type": "image/png",
        "size": len(png(4, 4)),
        "url": f"/sessions/{sid}/files/shot.png",
        "name": "shot.png",
    }
    for bad in ("missing.png", "../shot.png", ".images.json"):
        r = await client.post(f"/sessions/{sid}/publish", json={"filename": bad})
        assert r.status_code == 404, bad
