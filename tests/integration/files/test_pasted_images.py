from __future__ import annotations

import base64
import os
from pathlib import Path

from litestar.testing import AsyncTestClient

from app.config import Settings
from tests.conftest import ADMIN_TOKEN
from tests.unit.compression.images import gif, jpeg, png


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


async def _session(client: AsyncTestClient) -> str:
    r = await client.post("/sessions", json={"profile_id": "default"})
    assert r.status_code == 201, r.text
    return r.json()["id"]


async def _append(client: AsyncTestClient, sid: str, messages: list) -> None:  # type: ignore[type-arg]
    r = await client.post(f"/sessions/{sid}/messages", json={"messages": messages})
    assert r.status_code == 201, r.text


def _dir(settings: Settings, sid: str) -> Path:
    return settings.data_path / "session_files" / sid


def _visible(directory: Path) -> list[str]:
    if not directory.is_dir():
        return []
    return sorted(n for n in os.listdir(directory) if not n.startswith("."))


async def test_images_numbered_across_the_session_and_deduplicated(
    client: AsyncTestClient, settings: Settings
) -> None:
    sid = await _session(client)
    a, b, c = png(64, 64), jpeg(32, 32), gif(8, 8)
    await _append(
        client, sid, [{"role": "system", "content": "n", "metadata": {"source": "task_note"}}]
    )
    await _append(client, sid, [{"role": "assistant", "content": "hello"}])
    await _append(client, sid, [{"role": "user", "content": "look", "images": [b64(a)]}])
    await _append(client, sid, [{"role": "user", "content": "and", "images": [b64(b), b64(a)]}])
    await _append(client, sid, [{"role": "user", "content": "more", "images": [b64(c)]}])
    d = _dir(settings, sid)
    assert _visible(d) == ["image_1.png", "image_2.jpg", "image_3.gif"]
    assert (d / "image_1.png").read_bytes() == a  # stored exactly, never re-encoded
    assert (d / "image_2.jpg").read_bytes() == b

    ctx = (await client.get(f"/sessions/{sid}/context")).json()["messages"][2:]
    p = f"session_files/{sid}"
    assert ctx[0]["content"] == (
        "look\n\n[1 images attached inline — already in your context, no extra loading "
        f"needed.\nOn disk: {p}/image_1.png]"
    )
    assert ctx[1]["content"] == (
        "and\n\n[2 images attached inline — already in your context, no extra loading "
        f"needed.\nOn disk: {p}/image_2.jpg, {p}/image_1.png]"
    )
    assert ctx[1]["images"] == [b64(b), b64(a)]
    # the display copy is unchanged
    hist = (await client.get(f"/sessions/{sid}/messages")).json()["messages"][2:]
    assert [m["content"] for m in hist] == ["look", "and", "more"]
    assert hist[1]["images"] == [b64(b), b64(a)]
    # the files are listed and downloadable like uploads
    listing = (await client.get(f"/sessions/{sid}/files")).json()
    assert [f["name"] for f in listing["items"]] == _visible(d)
    r = await client.get(f"/sessions/{sid}/files/image_2.jpg")
    assert r.content == b and r.headers["content-type"] == "image/jpeg"


async def test_images_past_the_budget_are_not_loaded(make_client, settings: Settings) -> None:  # type: ignore[no-untyped-def]
    # window 2048: budget 0.8 × 2048 − context ≈ 1630; a 1024² image costs 1026 tokens.
    async with make_client(settings, ollama_num_ctx=2048) as c:
        c.headers["Authorization"] = f"Bearer {ADMIN_TOKEN}"
        sid = await _session(c)
        big1, big2, small = png(1024, 1024), png(1024, 1000), png(100, 100)
        await _append(
            c,
            sid,
            [{"role": "user", "content": "three", "images": [b64(big1), b64(big2), b64(small)]}],
        )
        ctx = (await c.get(f"/sessions/{sid}/context")).json()["messages"]
        p = f"session_files/{sid}"
        assert ctx[0]["content"] == (
            "three\n\n[3 images attached inline — 1 are in your context, the rest were not "
            f"loaded;\nopen them with image_view: {p}/image_2.png, {p}/image_3.png]"
        )
        assert ctx[0]["images"] == [b64(big1)]  # only the admitted one reaches the model
        # the prepare endpoint sends the model the same view, priced with one image only
        prep = (await c.post(f"/sessions/{sid}/prepare", json={})).json()
        assert prep["context"][0]["content"] == ctx[0]["content"]
        assert prep["context"][0]["images"] == [b64(big1)]
        assert 1026 <= prep["tokens"] < 2 * 1026
        hist = (await c.get(f"/sessions/{sid}/messages")).json()["messages"]
        assert hist[0]["content"] == "three" and len(hist[0]["images"]) == 3
        # the context now holds ~1026 image tokens: the next big image no longer fits
        await _append(c, sid, [{"role": "user", "content": "again", "images": [b64(big2)]}])
        ctx = (await c.get(f"/sessions/{sid}/context")).json()["messages"]
        assert "0 are in your context" in ctx[1]["content"]
        assert f"image_view: {p}/image_2.png]" in ctx[1]["content"]  # reused, not copied
        assert ctx[1]["images"] == []
    assert _visible(_dir(settings, sid)) == ["image_1.png", "image_2.png", "image_3.png"]


async def test_hidden_turns_and_other_roles_write_nothing(
    client: AsyncTestClient, settings: Settings
) -> None:
    sid = await _session(client)
    await _append(
        client,
        sid,
        [
            {
                "role": "user",
                "content": "form",
                "images": [b64(png(2, 2))],
                "metadata": {"hidden": True},
            },
            {"role": "tool", "content": "shot", "images": [b64(png(3, 3))], "name": "screenshot"},
        ],
    )
    assert _visible(_dir(settings, sid)) == []
    ctx = (await client.get(f"/sessions/{sid}/context")).json()["messages"]
    assert [m["content"] for m in ctx] == ["form", "shot"]


async def test_unwritable_directory_is_logged_and_skipped(
    make_client, settings: Settings, capsys
) -> None:  # type: ignore[no-untyped-def]
    async with make_client(settings) as client:  # built after capsys: its logs are captured
        client.headers["Authorization"] = f"Bearer {ADMIN_TOKEN}"
        sid = await _session(client)
        root = settings.data_path / "session_files"
        root.mkdir(parents=True, exist_ok=True)
        (root / sid).write_text("not a directory")  # root ignores permissions; this cannot be used
        await _append(client, sid, [{"role": "user", "content": "pic", "images": [b64(png(5, 5))]}])
        out = capsys.readouterr()
        assert "agent.image_save_failed" in out.out + out.err
        hist = (await client.get(f"/sessions/{sid}/messages")).json()["messages"]
        assert hist[0]["content"] == "pic" and len(hist[0]["images"]) == 1
        ctx = (await client.get(f"/sessions/{sid}/context")).json()["messages"]
        assert ctx[0]["content"] == "pic"  # nothing on disk to point at: no notice
