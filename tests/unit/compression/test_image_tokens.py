from __future__ import annotations

import pytest

from app.domain.compression.image_tokens import (
    image_dimensions,
    image_extension,
    image_tokens,
    tokens_for_dimensions,
)

from .images import gif, jpeg, png, webp_vp8, webp_vp8l, webp_vp8x

BUILDERS = {
    "png": png,
    "gif": gif,
    "jpeg": jpeg,
    "webp_vp8": webp_vp8,
    "webp_vp8l": webp_vp8l,
    "webp_vp8x": webp_vp8x,
}


@pytest.mark.parametrize("kind", sorted(BUILDERS))
@pytest.mark.parametrize("size", [(1, 1), (640, 480), (1024, 1024), (1920, 1080), (333, 4001)])
def test_dimensions_of_every_format(kind: str, size: tuple[int, int]) -> None:
    if kind == "webp_vp8" and max(size) > 0x3FFF:
        pytest.skip("outside VP8 range")
    assert image_dimensions(BUILDERS[kind](*size)) == size


def test_large_dimensions_beyond_16_bits_in_vp8x() -> None:
    assert image_dimensions(webp_vp8x(70000, 3)) == (70000, 3)


@pytest.mark.parametrize("sof", [0xC0, 0xC1, 0xC2, 0xC3, 0xC5, 0xC7, 0xC9, 0xCB, 0xCD, 0xCF])
def test_jpeg_any_sof_marker(sof: int) -> None:
    assert image_dimensions(jpeg(800, 600, sof=sof)) == (800, 600)


def test_jpeg_walks_segments_and_ignores_sof_lookalike_in_payload() -> None:
    assert image_dimensions(jpeg(1234, 567, decoy=True)) == (1234, 567)


def test_jpeg_dht_is_not_a_frame_header() -> None:
    # Only SOI + DHT + EOI: no SOF at all.
    data = b"\xff\xd8\xff\xc4\x00\x13" + bytes(17) + b"\xff\xd9"
    assert image_dimensions(data) is None


def test_jpeg_fill_bytes_before_marker() -> None:
    data = jpeg(10, 20, decoy=False)
    padded = data[:2] + b"\xff\xff" + data[2:]
    assert image_dimensions(padded) == (10, 20)


def test_jpeg_truncated_and_start_of_scan_first() -> None:
    assert image_dimensions(b"\xff\xd8\xff") is None
    assert image_dimensions(b"\xff\xd8\xff\xda\x00\x08" + bytes(6)) is None
    full = jpeg(100, 100, decoy=False)
    assert image_dimensions(full[: full.index(b"\xff\xc0") + 6]) is None


@pytest.mark.parametrize(
    "data",
    [b"", b"not an image", b"\x89PNG\r\n\x1a\n", b"GIF89a\x01", b"RIFF\x00\x00\x00\x00WEBPVP8 "],
)
def test_unreadable_headers(data: bytes) -> None:
    assert image_dimensions(data) is None
    assert image_tokens(data) == 1024
    assert image_tokens(data, fallback=777) == 777


def test_zero_sized_image_is_unreadable() -> None:
    assert image_dimensions(png(0, 10)) is None
    assert image_tokens(png(0, 10), fallback=5) == 5


def test_extension_from_signature() -> None:
    assert image_extension(png(2, 2)) == "png"
    assert image_extension(jpeg(2, 2)) == "jpg"
    assert image_extension(gif(2, 2)) == "gif"
    assert image_extension(webp_vp8l(2, 2)) == "webp"
    assert image_extension(b"%PDF-1.7") is None
    assert image_extension(b"") is None


def test_spec_prices() -> None:
    assert image_tokens(png(1024, 1024)) == 1026
    assert image_tokens(png(2048, 2048)) == 4098
    assert image_tokens(png(4096, 4096)) == 4098  # downscaled to 2048²
    assert image_tokens(png(512, 512)) == 258  # 16×16 + 2
    assert image_tokens(png(1024, 1024)) == 4 * image_tokens(png(512, 512)) - 6


def test_tiny_images_clamp_to_256() -> None:
    assert image_tokens(png(1, 1)) == 256
    assert image_tokens(gif(32, 32)) == 256
    assert image_tokens(jpeg(200, 100)) == 256


def test_downscale_preserves_aspect() -> None:
    # 4096×1024 → 2048×512: 64 × 16 patches.
    assert tokens_for_dimensions(4096, 1024) == 64 * 16 + 2
    # 8000×1000 → 2048×256: 64 × 8 = 512 patches.
    assert tokens_for_dimensions(8000, 1000) == 512 + 2
    assert tokens_for_dimensions(1000, 8000) == 512 + 2


def test_partial_patches_round_up() -> None:
    assert tokens_for_dimensions(1025, 1024) == 33 * 32 + 2


def test_price_never_exceeds_full_grid() -> None:
    for w, h in [(2048, 2048), (2049, 2049), (10_000, 9_999), (16383, 16383)]:
        assert 256 <= tokens_for_dimensions(w, h) <= 4098


def test_each_format_prices_by_area() -> None:
    for build in BUILDERS.values():
        assert image_tokens(build(1024, 1024)) == 1026
