from __future__ import annotations

import hashlib
import json
from pathlib import Path

from app.domain.files.images import INDEX_FILE, context_view, store_images
from app.domain.files.notice import admitted_images, image_budget, image_notice
from tests.unit.compression.images import gif, jpeg, png


def test_budget_and_admission() -> None:
    assert image_budget(10_000, 3_000) == 5_000
    assert image_budget(1_000, 900) == -100
    assert admitted_images([1026, 1026, 1026], 2_100) == 2
    assert admitted_images([1026, 258], 1_000) == 0  # in order: the first does not fit
    assert admitted_images([], 0) == 0
    assert admitted_images([256, 256], 512) == 2


def test_notice_all_in_context() -> None:
    note = image_notice(2, 2, ["session_files/S/image_1.png", "session_files/S/image_2.jpg"])
    assert note == (
        "[2 images attached inline — already in your context, no extra loading needed.\n"
        "On disk: session_files/S/image_1.png, session_files/S/image_2.jpg]"
    )


def test_notice_partially_loaded() -> None:
    paths = [f"session_files/S/image_{i}.png" for i in (1, 2, 3)]
    assert image_notice(3, 1, paths) == (
        "[3 images attached inline — 1 are in your context, the rest were not loaded;\n"
        "open them with image_view: session_files/S/image_2.png, session_files/S/image_3.png]"
    )


def test_no_notice_when_nothing_was_stored() -> None:
    assert image_notice(2, 2, [None, None]) is None


def test_context_view() -> None:
    meta = {"context_note": "[note]", "context_images": 1}
    assert context_view("hi", ["a", "b"], meta) == ("hi\n\n[note]", ["a"])
    assert context_view("", None, {"context_note": "[n]"}) == ("[n]", None)
    assert context_view("hi", ["a"], {}) == ("hi", ["a"])
    # a malformed count never hides images
    assert context_view("hi", ["a"], {"context_images": "x"}) == ("hi", ["a"])


def test_store_images_numbers_across_formats_and_dedupes(tmp_path: Path) -> None:
    a, b, c = png(10, 10), jpeg(20, 20), gif(3, 3)
    assert store_images(tmp_path, [a]) == ["image_1.png"]
    assert store_images(tmp_path, [b, a]) == ["image_2.jpg", "image_1.png"]
    assert (tmp_path / "image_1.png").read_bytes() == a  # exactly the bytes
    assert (tmp_path / "image_2.jpg").read_bytes() == b
    # an upload took the next name: numbering skips it
    (tmp_path / "image_3.gif").write_bytes(b"someone else's")
    assert store_images(tmp_path, [c]) == ["image_4.gif"]
    index = json.loads((tmp_path / INDEX_FILE).read_text())
    assert index["sha256"][hashlib.sha256(a).hexdigest()] == "image_1.png"


def test_index_is_rebuilt_from_the_directory(tmp_path: Path) -> None:
    a, b = png(1, 2), png(2, 1)
    store_images(tmp_path, [a, b])
    (tmp_path / INDEX_FILE).write_text("{not json")
    assert store_images(tmp_path, [b, png(3, 3)]) == ["image_2.png", "image_3.png"]
    # a file deleted by hand is written again
    (tmp_path / "image_1.png").unlink()
    assert store_images(tmp_path, [a]) == ["image_4.png"]
