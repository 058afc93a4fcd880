"""minterpr.data.images: any image Pillow opens becomes 8-bit RGB; anything else is one ImageError."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from PIL import Image, ImageOps

from minterpr.data.images import BACKGROUND, load_rgb, to_rgb
from minterpr.errors import ImageError


def _grey_pattern() -> np.ndarray:
    """A 64x32 8-bit picture with structure (gradients and a dark band), not a flat field."""
    y, x = np.mgrid[0:64, 0:32]
    pattern = 40 + 3 * y + 2 * x
    pattern[20:28] = 15
    return np.clip(pattern, 0, 255).astype(np.uint8)


def test_sixteen_bit_greyscale_matches_its_eight_bit_version(tmp_path: Path):
    torch = pytest.importorskip("torch")
    from minterpr.models.encoders.preprocess import ImagePreprocess

    grey8 = _grey_pattern()
    Image.fromarray(grey8, "L").save(tmp_path / "grey8.png")
    Image.fromarray(grey8.astype(np.uint16) * 257).save(tmp_path / "grey16.png")
    with Image.open(tmp_path / "grey16.png") as opened:
        assert opened.mode == "I;16"  # a real 16-bit file, not converted on save
    prep = ImagePreprocess(size=(64, 32))
    a, b = prep.load(tmp_path / "grey8.png").flatten(), prep.load(tmp_path / "grey16.png").flatten()
    assert torch.nn.functional.cosine_similarity(a, b, dim=0).item() > 0.99
    assert np.array_equal(np.asarray(load_rgb(tmp_path / "grey16.png"))[..., 0], grey8)
    # an in-memory 16-bit image given to the preprocessing directly is scaled the same way
    with Image.open(tmp_path / "grey16.png") as image:
        c = prep(image).flatten()
    assert torch.nn.functional.cosine_similarity(a, c, dim=0).item() > 0.99


@pytest.mark.parametrize(
    "mode, values, expected",
    [
        ("I;16B", [0, 257 * 128, 65535], [0, 128, 255]),
        ("I", [0, 257 * 64, 65535], [0, 64, 255]),  # 16-bit data as Pillow opens some formats
        ("I", [-1000, 0, 1000], [0, 128, 255]),  # beyond 16 bits: its own range
        ("F", [0.0, 0.5, 1.0], [0, 128, 255]),  # float in 0..1
        ("F", [-3.0, 0.0, 3.0], [0, 128, 255]),  # any other float range: its own range
    ],
)
def test_wide_greyscale_modes_are_scaled_by_their_range(mode, values, expected):
    image = Image.new(mode, (3, 1))
    for x, value in enumerate(values):
        image.putpixel((x, 0), value)
    rgb = to_rgb(image)
    assert rgb.mode == "RGB" and [rgb.getpixel((x, 0))[0] for x in range(3)] == expected


def test_flat_and_non_finite_wide_images_do_not_fail():
    assert to_rgb(Image.new("F", (2, 2), float("nan"))).getpixel((0, 0)) == (0, 0, 0)
    assert to_rgb(Image.new("I", (2, 2), 70000)).getpixel((0, 0)) == (128, 128, 128)


def test_transparency_is_composited_on_the_background(tmp_path: Path):
    rgba = Image.new("RGBA", (4, 4), (255, 0, 0, 0))
    rgba.putpixel((0, 0), (255, 0, 0, 255))
    assert to_rgb(rgba).getpixel((1, 1)) == BACKGROUND and to_rgb(rgba).getpixel((0, 0)) == (255, 0, 0)
    assert to_rgb(Image.new("LA", (2, 2), (255, 0))).getpixel((0, 0)) == BACKGROUND
    palette = Image.new("P", (4, 4), 1)
    palette.putpalette([0, 0, 0, 255, 255, 255] + [0] * 762)
    palette.putpixel((0, 0), 0)
    palette.save(tmp_path / "p.png", transparency=1)  # index 1 (white) is transparent
    image = load_rgb(tmp_path / "p.png")
    assert image.getpixel((0, 0)) == (0, 0, 0) and image.getpixel((2, 2)) == BACKGROUND


def test_cmyk_and_one_bit_images_convert(tmp_path: Path):
    Image.new("CMYK", (8, 8), (0, 255, 255, 0)).save(tmp_path / "cmyk.jpg")
    red, green, blue = load_rgb(tmp_path / "cmyk.jpg").getpixel((4, 4))
    assert red > 200 and green < 60 and blue < 60
    assert to_rgb(Image.new("1", (2, 2), 1)).getpixel((0, 0)) == (255, 255, 255)


def test_exif_orientation_is_applied(tmp_path: Path):
    image = Image.new("RGB", (20, 40), (200, 0, 0))
    image.paste((0, 0, 200), (0, 20, 20, 40))  # red top, blue bottom
    exif = Image.Exif()
    exif[0x0112] = 6  # stored sideways: rotate 90 degrees clockwise to view
    image.save(tmp_path / "phone.jpg", exif=exif, quality=95)
    loaded = load_rgb(tmp_path / "phone.jpg")
    with Image.open(tmp_path / "phone.jpg") as raw:
        expected = ImageOps.exif_transpose(raw).convert("RGB")
    assert loaded.size == (40, 20) == expected.size
    assert np.abs(np.asarray(loaded, np.int16) - np.asarray(expected, np.int16)).max() <= 1


def _jpeg_bytes() -> bytes:
    buffer = io.BytesIO()
    Image.fromarray(np.random.default_rng(0).integers(0, 255, (64, 64, 3), dtype=np.uint8)).save(buffer, "JPEG")
    return buffer.getvalue()


def test_every_failure_names_the_file_and_the_reason(tmp_path: Path, monkeypatch):
    cases = {
        "missing.png": (None, "image not found"),
        "text.png": (b"hello, not an image", "not an image"),
        "cut.jpg": (_jpeg_bytes()[:700], "truncated"),
        "empty.png": (b"", "not an image"),
    }
    for name, (content, words) in cases.items():
        if content is not None:
            (tmp_path / name).write_bytes(content)
        with pytest.raises(ImageError) as info:
            load_rgb(tmp_path / name)
        assert info.value.path == str(tmp_path / name) and words in info.value.reason
        assert str(info.value).startswith(str(tmp_path / name))
    with pytest.raises(ImageError, match="is a folder"):
        load_rgb(tmp_path)
    Image.new("RGB", (40, 30)).save(tmp_path / "big.png")
    Image.new("RGB", (12, 10)).save(tmp_path / "large.png")
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 100)
    with pytest.raises(ImageError, match=r"big.png: too large to decode safely"):  # Pillow's own error
        load_rgb(tmp_path / "big.png")
    with (
        pytest.warns(Image.DecompressionBombWarning),
        pytest.raises(ImageError, match=r"large.png: too large to decode safely: 12x10 pixels"),
    ):
        load_rgb(tmp_path / "large.png")  # Pillow only warns: refused all the same


def test_preprocess_load_raises_image_error(tmp_path: Path):
    pytest.importorskip("torch")
    from minterpr.models.encoders.preprocess import ImagePreprocess

    (tmp_path / "bad.jpg").write_bytes(_jpeg_bytes()[:500])
    with pytest.raises(ImageError, match="bad.jpg: truncated"):
        ImagePreprocess(size=(32, 16)).load(tmp_path / "bad.jpg")


_HEADERS = [b"", b"\x89PNG\r\n\x1a\n", b"\xff\xd8\xff\xe0", b"GIF89a", b"BM", b"II*\x00", b"RIFF\x00\x00\x00\x00WEBP"]


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(header=st.sampled_from(_HEADERS), body=st.binary(max_size=300), cut=st.integers(0, 3000))
def test_random_image_bytes_give_an_image_or_an_image_error(tmp_path: Path, header, body, cut):
    """Random bytes, with real format headers and cut-off real files: only ImageError escapes."""
    path = tmp_path / "fuzz.img"
    real = _jpeg_bytes()
    path.write_bytes(header + body if cut % 2 else real[: cut % len(real)] + body)
    try:
        image = load_rgb(path)
    except ImageError as exc:
        assert exc.path == str(path) and exc.reason
    else:
        assert image.mode == "RGB"
